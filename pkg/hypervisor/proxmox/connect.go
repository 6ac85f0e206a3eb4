package proxmox

import (
	"context"
	"fmt"
	"strings"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Connector is Proxmox VE's connection.ProviderBuilder: an API token or a user and password from
// the credentials Secret, spec.proxmox's settings, and Build (New when nil) to make the client.
// pkg/providers registers it for provider Proxmox.
type Connector struct {
	// Build constructs the provider; tests swap it to reach the simulator differently.
	Build func(cfg Config) (hypervisor.Provider, error)
}

// Config implements connection.ProviderBuilder.
func (b Connector) Config(ctx context.Context, src connection.Source) (connection.Config, error) {
	hc := src.HypervisorCluster
	cfg := Config{
		Endpoint:           hc.Spec.Endpoint,
		InsecureSkipVerify: hc.Spec.InsecureSkipTLSVerify,
		AllowInsecureHTTP:  hc.Spec.AllowInsecureHTTP,
		Timeout:            src.Timeout,
		TaskPollInterval:   src.TaskPollInterval,
		Cluster:            src.Key(),
		InstallationID:     hc.Spec.InstallationID,
	}
	if p := hc.Spec.Proxmox; p != nil {
		cfg.ISOStorage = p.ISOStorage
		if p.CloudInitDelivery == infrav1.CloudInitSnippets {
			return nil, &connection.Error{Reason: infrav1.HypervisorClusterUnsupportedSettingReason,
				Message: "cloudInitDelivery Snippets is not supported yet: the Proxmox API cannot upload snippets; use ISO"}
		}
	}
	creds, err := src.Credentials(ctx)
	if err != nil {
		return nil, err
	}
	d := creds.Data
	switch {
	case len(d[connection.KeyTokenID]) > 0 && len(d[connection.KeyTokenSecret]) > 0:
		cfg.TokenID, cfg.TokenSecret = strings.TrimSpace(string(d[connection.KeyTokenID])), strings.TrimSpace(string(d[connection.KeyTokenSecret]))
	case len(d[connection.KeyUsername]) > 0 && len(d[connection.KeyPassword]) > 0:
		cfg.Username, cfg.Password = strings.TrimSpace(string(d[connection.KeyUsername])), string(d[connection.KeyPassword])
	default:
		return nil, &connection.Error{Reason: infrav1.HypervisorClusterCredentialsInvalidReason,
			Message: fmt.Sprintf("credentials Secret %s/%s needs keys %s and %s, or %s and %s",
				hc.Namespace, creds.Name, connection.KeyTokenID, connection.KeyTokenSecret, connection.KeyUsername, connection.KeyPassword)}
	}
	if cfg.CABundle, err = src.CABundle(ctx); err != nil {
		return nil, err
	}
	build := b.Build
	if build == nil {
		build = func(cfg Config) (hypervisor.Provider, error) { return New(cfg) }
	}
	return connectConfig{cfg: cfg, build: build}, nil
}

type connectConfig struct {
	cfg   Config
	build func(Config) (hypervisor.Provider, error)
}

func (c connectConfig) Hash() string                        { return c.cfg.Hash() }
func (c connectConfig) Build() (hypervisor.Provider, error) { return c.build(c.cfg) }
