package hvsim

import (
	"errors"
	"testing"
)

// The defaults of StartHyperV's hosts.
const (
	// HyperVTestUser and HyperVTestPassword are the account every endpoint accepts.
	HyperVTestUser     = "hyperfleet"
	HyperVTestPassword = "Winter2026!"
	// HyperVTemplate is the template each host holds as a VHDX in the default template folder.
	HyperVTemplate     = "ubuntu-24.04-runner"
	HyperVTemplateDisk = `C:\ProgramData\HyperFleet\Templates\ubuntu-24.04-runner.vhdx`
	// HyperVSwitch is each host's virtual switch.
	HyperVSwitch = "runners"
)

// HyperVHosts is a set of simulated Hyper-V hosts, each behind its own WS-Man endpoint on
// loopback with TLS, as HyperFleet reaches real hosts.
type HyperVHosts struct {
	*HyperV
	// Servers are the hosts' endpoints by host name, Names the hosts in order.
	Servers map[string]*Server
	Names   []string
	// CAPEM holds the CA certificates of every endpoint.
	CAPEM []byte
}

// StartHyperV starts hosts with 16 logical processors, 64 GiB, the HyperVSwitch switch and the
// HyperVTemplate disk, each with its own endpoint accepting HyperVTestUser. opts sets the
// endpoints' other options (TLS is always on; Executor and Users are set here).
func StartHyperV(cfg HyperVConfig, opts Options, hosts ...string) (*HyperVHosts, error) {
	hv := NewHyperV(cfg)
	out := &HyperVHosts{HyperV: hv, Servers: map[string]*Server{}, Names: hosts}
	for _, h := range hosts {
		hv.AddHost(h, 16, 64<<10, HyperVSwitch)
		if err := hv.AddTemplateDisk(h, HyperVTemplateDisk, 20); err != nil {
			return nil, errors.Join(err, out.Close())
		}
		o := opts
		o.TLS, o.Executor = true, hv.Executor(h)
		if o.Users == nil {
			o.Users = map[string]string{HyperVTestUser: HyperVTestPassword}
		}
		srv, err := Start(o)
		if err != nil {
			return nil, errors.Join(err, out.Close())
		}
		out.Servers[h] = srv
		out.CAPEM = append(out.CAPEM, srv.CAPEM()...)
	}
	return out, nil
}

// StartHyperVForTest is StartHyperV for a test, closed when it ends.
func StartHyperVForTest(t testing.TB, cfg HyperVConfig, hosts ...string) *HyperVHosts {
	t.Helper()
	out, err := StartHyperV(cfg, Options{}, hosts...)
	if err != nil {
		t.Fatalf("hyper-v simulator: %v", err)
	}
	t.Cleanup(func() { _ = out.Close() })
	return out
}

// Close stops the endpoints, all at once (each may wait for a connection the client has just
// opened), and the guests.
func (h *HyperVHosts) Close() error {
	errs := make(chan error, len(h.Servers))
	for _, s := range h.Servers {
		go func() { errs <- s.Close() }()
	}
	var all []error
	for range h.Servers {
		all = append(all, <-errs)
	}
	h.HyperV.Close()
	return errors.Join(all...)
}
