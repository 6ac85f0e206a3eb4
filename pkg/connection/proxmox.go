package connection

import (
	"context"
	"fmt"
	"strings"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/proxmox"
)

// Builder constructs a Proxmox VE provider from its configuration; tests swap it to poll faster or
// to reach the simulator.
type Builder func(cfg proxmox.Config) (hypervisor.Provider, error)

// DefaultBuilder builds the go-proxmox implementation.
func DefaultBuilder(cfg proxmox.Config) (hypervisor.Provider, error) { return proxmox.New(cfg) }

// Proxmox is the ProviderBuilder of Proxmox VE: an API token or a user and password from the
// credentials Secret, spec.proxmox's settings, and Build (DefaultBuilder when nil) to make the client.
type Proxmox struct {
	Build Builder
}

// Config implements ProviderBuilder.
func (b Proxmox) Config(ctx context.Context, src Source) (Config, error) {
	hc := src.HypervisorCluster
	cfg := proxmox.Config{
		Endpoint:           hc.Spec.Endpoint,
		InsecureSkipVerify: hc.Spec.InsecureSkipTLSVerify,
		AllowInsecureHTTP:  hc.Spec.AllowInsecureHTTP,
		Timeout:            src.Timeout,
		Cluster:            src.Key(),
		InstallationID:     hc.Spec.InstallationID,
		AllowedNodes:       hc.Spec.AllowedNodes,
	}
	if p := hc.Spec.Proxmox; p != nil {
		cfg.ISOStorage = p.ISOStorage
		if p.CloudInitDelivery == infrav1.CloudInitSnippets {
			return nil, &Error{Reason: infrav1.HypervisorClusterUnsupportedSettingReason,
				Message: "cloudInitDelivery Snippets is not supported yet: the Proxmox API cannot upload snippets; use ISO"}
		}
	}
	creds, err := src.Credentials(ctx)
	if err != nil {
		return nil, err
	}
	d := creds.Data
	switch {
	case len(d[KeyTokenID]) > 0 && len(d[KeyTokenSecret]) > 0:
		cfg.TokenID, cfg.TokenSecret = strings.TrimSpace(string(d[KeyTokenID])), strings.TrimSpace(string(d[KeyTokenSecret]))
	case len(d[KeyUsername]) > 0 && len(d[KeyPassword]) > 0:
		cfg.Username, cfg.Password = strings.TrimSpace(string(d[KeyUsername])), string(d[KeyPassword])
	default:
		return nil, &Error{Reason: infrav1.HypervisorClusterCredentialsInvalidReason,
			Message: fmt.Sprintf("credentials Secret %s/%s needs keys %s and %s, or %s and %s",
				hc.Namespace, creds.Name, KeyTokenID, KeyTokenSecret, KeyUsername, KeyPassword)}
	}
	if cfg.CABundle, err = src.CABundle(ctx); err != nil {
		return nil, err
	}
	build := b.Build
	if build == nil {
		build = DefaultBuilder
	}
	return proxmoxConfig{cfg: cfg, build: build}, nil
}

type proxmoxConfig struct {
	cfg   proxmox.Config
	build Builder
}

func (c proxmoxConfig) Hash() string                        { return c.cfg.Hash() }
func (c proxmoxConfig) Build() (hypervisor.Provider, error) { return c.build(c.cfg) }
