package spire

import (
	"context"
	"errors"
	"sync"

	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

var errClosed = errors.New("SPIRE provisioners closed")

// Provisioners keeps one Provisioner per SPIRE server address, so BootstrapConfigs naming the
// same server share a connection. Connections are made on first use.
type Provisioners struct {
	// Config is applied to every server; its Address is replaced by the one asked for.
	Config Config

	mu     sync.Mutex
	byAddr map[string]*Provisioner
	closed bool
}

// For returns the Provisioner for the SPIRE server at address.
func (ps *Provisioners) For(ctx context.Context, address string) (identity.Provisioner, error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil, errClosed
	}
	if p, ok := ps.byAddr[address]; ok {
		return p, nil
	}
	cfg := ps.Config
	cfg.Address = address
	p, err := NewProvisioner(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if ps.byAddr == nil {
		ps.byAddr = map[string]*Provisioner{}
	}
	ps.byAddr[address] = p
	return p, nil
}

// Close closes every connection.
func (ps *Provisioners) Close() error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.closed = true
	var errs []error
	for _, p := range ps.byAddr {
		errs = append(errs, p.Close())
	}
	ps.byAddr = nil
	return errors.Join(errs...)
}
