package proxmox

import (
	"context"
	"net/url"
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

var _ hypervisor.Migrator = (*Provider)(nil)

// Migrate moves an owned VM to another node (POST …/migrate, task qmigrate on the source node).
// PVE refuses the local node as target, a locked VM and a running VM without online in the
// request; host devices, local disks without with-local-disks and storage the target lacks fail
// the task, with PVE's text.
func (p *Provider) Migrate(ctx context.Context, ref hypervisor.VMRef, spec hypervisor.MigrateSpec) (hypervisor.TaskID, error) {
	op := opName("migrate", ref)
	if spec.Target == "" {
		return "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "no target node")
	}
	if spec.Target == ref.Node {
		return "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "target is local node.")
	}
	if _, err := p.ensureOwned(ctx, op, ref); err != nil {
		return "", err
	}
	params := map[string]any{"target": spec.Target}
	if spec.Online {
		params["online"] = 1
	}
	if spec.WithLocalDisks {
		params["with-local-disks"] = 1
	}
	var id string
	if err := p.post(ctx, op+" to "+spec.Target, vmPath(ref, "/migrate"), params, &id); err != nil {
		return "", err
	}
	return hypervisor.TaskID(id), nil
}

// CancelTask stops a running task (DELETE /nodes/{node}/tasks/{upid}); PVE interrupts the worker,
// and an interrupted migration leaves the VM on its source node. A task that has ended already is
// left alone.
func (p *Provider) CancelTask(ctx context.Context, node string, id hypervisor.TaskID) error {
	op := "cancel task " + string(id)
	u, err := parseUPID(string(id))
	if err != nil {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "%v", err)
	}
	if node != "" && node != u.node {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "task runs on node %q, not %q", u.node, node)
	}
	return p.delete(ctx, op, "/nodes/"+url.PathEscape(u.node)+"/tasks/"+url.PathEscape(u.raw), nil)
}
