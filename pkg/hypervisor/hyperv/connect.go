package hyperv

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Connector is Hyper-V's connection.ProviderBuilder: the hosts of spec.hyperv (or the one host of
// spec.endpoint), a user and password from the credentials Secret, the CA bundle, and Build (New
// over WinRM when nil) to make the provider. pkg/providers registers it for provider hyperv.
type Connector struct {
	// Build constructs the provider; tests swap it to reach the simulator differently.
	Build func(cfg Config) (hypervisor.Provider, error)
}

// Config implements connection.ProviderBuilder.
func (b Connector) Config(ctx context.Context, src connection.Source) (connection.Config, error) {
	hc := src.HypervisorCluster
	cfg := Config{
		InsecureSkipVerify: hc.Spec.InsecureSkipTLSVerify,
		AllowInsecureHTTP:  hc.Spec.AllowInsecureHTTP,
		Timeout:            src.Timeout,
		Cluster:            src.Key(),
		InstallationID:     hc.Spec.InstallationID,
	}
	if hv := hc.Spec.HyperV; hv != nil {
		for _, h := range hv.Hosts {
			cfg.Hosts = append(cfg.Hosts, Host{Name: h.Name, Endpoint: h.Endpoint})
		}
		cfg.Auth = string(hv.Auth)
		cfg.VMDirectory, cfg.VHDDirectory, cfg.TemplateDirectory = hv.VMPath, hv.VHDPath, hv.TemplatePath
		cfg.SeedDirectory, cfg.ModuleRoot = hv.SeedISOPath, hv.ModulePath
		cfg.SecureBootTemplate = hv.SecureBootTemplate
	}
	if len(cfg.Hosts) == 0 {
		u, err := url.Parse(hc.Spec.Endpoint)
		if err != nil || u.Hostname() == "" {
			return nil, &connection.Error{Reason: infrav1.HypervisorClusterUnsupportedSettingReason,
				Message: fmt.Sprintf("endpoint %q names no host; list the Hyper-V hosts in spec.hyperv.hosts", hc.Spec.Endpoint)}
		}
		cfg.Hosts = []Host{{Name: strings.SplitN(u.Hostname(), ".", 2)[0], Endpoint: hc.Spec.Endpoint}}
	}
	creds, err := src.Credentials(ctx)
	if err != nil {
		return nil, err
	}
	user, password := strings.TrimSpace(string(creds.Data[connection.KeyUsername])), string(creds.Data[connection.KeyPassword])
	if user == "" || password == "" {
		return nil, &connection.Error{Reason: infrav1.HypervisorClusterCredentialsInvalidReason,
			Message: fmt.Sprintf("credentials Secret %s/%s needs keys %s and %s (Hyper-V has no API tokens)",
				hc.Namespace, creds.Name, connection.KeyUsername, connection.KeyPassword)}
	}
	cfg.Username, cfg.Password = user, password
	if cfg.CABundle, err = src.CABundle(ctx); err != nil {
		return nil, err
	}
	if _, err := cfg.withDefaults(); err != nil {
		return nil, &connection.Error{Reason: infrav1.HypervisorClusterUnsupportedSettingReason, Message: err.Error(), Err: err}
	}
	build := b.Build
	if build == nil {
		build = func(cfg Config) (hypervisor.Provider, error) { return New(cfg, nil) }
	}
	return connectConfig{cfg: cfg, build: build}, nil
}

type connectConfig struct {
	cfg   Config
	build func(Config) (hypervisor.Provider, error)
}

func (c connectConfig) Hash() string                        { return c.cfg.Hash() }
func (c connectConfig) Build() (hypervisor.Provider, error) { return c.build(c.cfg) }
