package instrumented

import (
	"context"
	"net/netip"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

var (
	_ hypervisor.Networker  = (*provider)(nil)
	_ hypervisor.Storager   = (*provider)(nil)
	_ hypervisor.Replicator = (*provider)(nil)
)

func (p *provider) NetworkGaps(n hypervisor.VirtualNetwork) []hypervisor.NetworkGap {
	nw, ok := p.next.(hypervisor.Networker)
	if !ok {
		return []hypervisor.NetworkGap{{Field: "spec", Reason: "this hypervisor provider defines no networks"}}
	}
	return nw.NetworkGaps(n)
}

func (p *provider) EnsureNetwork(ctx context.Context, n hypervisor.VirtualNetwork) (hypervisor.NetworkRealization, error) {
	nw, ok := p.next.(hypervisor.Networker)
	if !ok {
		return hypervisor.NetworkRealization{}, unsupported("EnsureNetwork")
	}
	ctx, c := p.begin(ctx, "EnsureNetwork")
	out, err := nw.EnsureNetwork(ctx, n)
	c.end(err)
	return out, err
}

func (p *provider) DeleteNetwork(ctx context.Context, id string, owner hypervisor.Ownership) error {
	nw, ok := p.next.(hypervisor.Networker)
	if !ok {
		return unsupported("DeleteNetwork")
	}
	ctx, c := p.begin(ctx, "DeleteNetwork")
	err := nw.DeleteNetwork(ctx, id, owner)
	c.end(err)
	return err
}

func (p *provider) ReserveAddress(ctx context.Context, id string, owner hypervisor.Ownership, ip netip.Addr, mac string) error {
	nw, ok := p.next.(hypervisor.Networker)
	if !ok {
		return unsupported("ReserveAddress")
	}
	ctx, c := p.begin(ctx, "ReserveAddress")
	err := nw.ReserveAddress(ctx, id, owner, ip, mac)
	c.end(err)
	return err
}

func (p *provider) ReleaseAddress(ctx context.Context, id string, owner hypervisor.Ownership, ip netip.Addr, mac string) error {
	nw, ok := p.next.(hypervisor.Networker)
	if !ok {
		return unsupported("ReleaseAddress")
	}
	ctx, c := p.begin(ctx, "ReleaseAddress")
	err := nw.ReleaseAddress(ctx, id, owner, ip, mac)
	c.end(err)
	return err
}

func (p *provider) StorageGaps(sp hypervisor.StoragePool) []hypervisor.StorageGap {
	st, ok := p.next.(hypervisor.Storager)
	if !ok {
		return []hypervisor.StorageGap{{Field: "spec", Reason: "this hypervisor provider defines no storages"}}
	}
	return st.StorageGaps(sp)
}

func (p *provider) EnsureStorage(ctx context.Context, sp hypervisor.StoragePool) error {
	st, ok := p.next.(hypervisor.Storager)
	if !ok {
		return unsupported("EnsureStorage")
	}
	ctx, c := p.begin(ctx, "EnsureStorage")
	err := st.EnsureStorage(ctx, sp)
	c.end(err)
	return err
}

func (p *provider) DeleteStorage(ctx context.Context, name string, owner hypervisor.Ownership) error {
	st, ok := p.next.(hypervisor.Storager)
	if !ok {
		return unsupported("DeleteStorage")
	}
	ctx, c := p.begin(ctx, "DeleteStorage")
	err := st.DeleteStorage(ctx, name, owner)
	c.end(err)
	return err
}

func (p *provider) StorageState(ctx context.Context, name string) (hypervisor.StorageState, error) {
	st, ok := p.next.(hypervisor.Storager)
	if !ok {
		return hypervisor.StorageState{}, unsupported("StorageState")
	}
	ctx, c := p.begin(ctx, "StorageState")
	out, err := st.StorageState(ctx, name)
	c.end(err)
	return out, err
}

func (p *provider) EnsureReplication(ctx context.Context, job hypervisor.ReplicationJob) error {
	r, ok := p.next.(hypervisor.Replicator)
	if !ok {
		return unsupported("EnsureReplication")
	}
	ctx, c := p.begin(ctx, "EnsureReplication", refAttrs(job.VM)...)
	err := r.EnsureReplication(ctx, job)
	c.end(err)
	return err
}

func (p *provider) ReplicationState(ctx context.Context, vm hypervisor.VMRef) (hypervisor.ReplicationState, error) {
	r, ok := p.next.(hypervisor.Replicator)
	if !ok {
		return hypervisor.ReplicationState{}, unsupported("ReplicationState")
	}
	ctx, c := p.begin(ctx, "ReplicationState", refAttrs(vm)...)
	out, err := r.ReplicationState(ctx, vm)
	c.end(err)
	return out, err
}
