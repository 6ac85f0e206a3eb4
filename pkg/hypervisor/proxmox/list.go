package proxmox

import (
	"context"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

var _ hypervisor.VMLister = (*Provider)(nil)

// AllVMs lists every VM of the cluster but templates in one call: this installation's VMs with
// their Owner, all others (foreign, or another installation's) with none.
func (p *Provider) AllVMs(ctx context.Context) ([]hypervisor.VM, error) {
	rows, err := p.listVMs(ctx, "list VMs")
	if err != nil {
		return nil, err
	}
	var vms []hypervisor.VM
	for _, r := range rows {
		if (r.Type != "" && r.Type != "qemu") || r.Template != 0 {
			continue
		}
		owner, verdict := p.ownerFromTags(splitTags(r.Tags))
		if verdict != ours && verdict != legacy {
			owner = nil
		}
		vms = append(vms, hypervisor.VM{Ref: vmRef(r.Node, int(r.VMID)), Name: r.Name, State: powerState(r.Status, ""),
			Tags: splitTags(r.Tags), Lock: r.Lock, Cores: int(r.MaxCPU), MemoryMiB: int(r.MaxMem / (1 << 20)),
			Owner: owner, Uptime: time.Duration(r.Uptime) * time.Second, Usage: r.usage()})
	}
	return vms, nil
}
