package proxmox

import (
	"context"
	"sort"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

var _ hypervisor.MigrationChecker = (*Provider)(nil)

// CheckMigration reads PVE's migration precondition (GET …/migrate): the VM's local disks
// (CD-ROMs and unused disks included), its host devices and the nodes it could go to. It needs
// VM.Migrate; it changes nothing, so the VM need not be ours to read it, but only owned VMs are
// asked about.
func (p *Provider) CheckMigration(ctx context.Context, ref hypervisor.VMRef) (hypervisor.Migratability, error) {
	op := opName("check migration of", ref)
	if _, err := p.ensureOwned(ctx, op, ref); err != nil {
		return hypervisor.Migratability{}, err
	}
	var res struct {
		Running        number   `json:"running"`
		AllowedNodes   []string `json:"allowed_nodes"`
		LocalResources []string `json:"local_resources"`
		LocalDisks     []struct {
			VolID string `json:"volid"`
		} `json:"local_disks"`
	}
	if err := p.get(ctx, op, vmPath(ref, "/migrate"), &res); err != nil {
		return hypervisor.Migratability{}, err
	}
	m := hypervisor.Migratability{Running: res.Running != 0, LocalResources: res.LocalResources}
	for _, d := range res.LocalDisks {
		m.LocalDisks = append(m.LocalDisks, d.VolID)
	}
	// The HypervisorCluster's allowedNodes are applied by the caller, as for Nodes.
	m.AllowedHosts = append(m.AllowedHosts, res.AllowedNodes...)
	sort.Strings(m.AllowedHosts)
	return m, nil
}
