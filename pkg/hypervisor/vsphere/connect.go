package vsphere

import (
	"context"
	"fmt"
	"strings"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Connector is vSphere's connection.ProviderBuilder: the vCenter of spec.endpoint, a user and
// password from the credentials Secret, the CA bundle, and the inventory of spec.vsphere.
// pkg/providers registers it for provider vsphere.
type Connector struct{}

// Config implements connection.ProviderBuilder.
func (Connector) Config(ctx context.Context, src connection.Source) (connection.Config, error) {
	hc := src.HypervisorCluster
	cfg := Config{
		Endpoint:           hc.Spec.Endpoint,
		InsecureSkipVerify: hc.Spec.InsecureSkipTLSVerify,
		Timeout:            src.Timeout,
		Cluster:            src.Key(),
		InstallationID:     hc.Spec.InstallationID,
	}
	if v := hc.Spec.VSphere; v != nil {
		cfg.Datacenter, cfg.ComputeCluster, cfg.ResourcePool, cfg.Folder, cfg.Datastore = v.Datacenter, v.ComputeCluster, v.ResourcePool, v.Folder, v.Datastore
	}
	creds, err := src.Credentials(ctx)
	if err != nil {
		return nil, err
	}
	user, password := strings.TrimSpace(string(creds.Data[connection.KeyUsername])), string(creds.Data[connection.KeyPassword])
	if user == "" || password == "" {
		return nil, &connection.Error{Reason: infrav1.HypervisorClusterCredentialsInvalidReason,
			Message: fmt.Sprintf("credentials Secret %s/%s needs keys %s and %s (a vCenter user; vSphere has no API tokens here)",
				hc.Namespace, creds.Name, connection.KeyUsername, connection.KeyPassword)}
	}
	cfg.Username, cfg.Password = user, password
	if cfg.CABundle, err = src.CABundle(ctx); err != nil {
		return nil, err
	}
	if _, err := cfg.withDefaults(); err != nil {
		return nil, &connection.Error{Reason: infrav1.HypervisorClusterUnsupportedSettingReason, Message: err.Error(), Err: err}
	}
	return connectConfig{cfg: cfg}, nil
}

type connectConfig struct{ cfg Config }

func (c connectConfig) Hash() string { return c.cfg.Hash() }

func (c connectConfig) Build() (hypervisor.Provider, error) { return New(c.cfg) }
