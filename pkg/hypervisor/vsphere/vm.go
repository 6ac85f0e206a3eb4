package vsphere

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// vmProps are the properties every read of a VM takes, in one PropertyCollector call.
var vmProps = []string{"name", "config.template", "config.instanceUuid", "config.extraConfig",
	"config.hardware.numCPU", "config.hardware.memoryMB", "runtime.powerState", "runtime.host",
	"runtime.bootTime", "guest.net", "guest.ipAddress", "snapshot"}

// marks are a VM's ExtraConfig values HyperFleet reads.
type marks map[string]string

func marksOf(vm mo.VirtualMachine) marks {
	m := marks{}
	if vm.Config == nil {
		return m
	}
	for _, o := range vm.Config.ExtraConfig {
		if v := o.GetOptionValue(); v != nil && (strings.HasPrefix(v.Key, "hyperfleet.") || strings.HasPrefix(v.Key, "guestinfo.")) {
			if s, ok := v.Value.(string); ok {
				m[v.Key] = s
			}
		}
	}
	return m
}

// owner is the VM's ownership when this installation's HypervisorCluster made it, nil otherwise.
func (p *Provider) owner(m marks) *hypervisor.Ownership {
	if m[keyInstallation] != p.cfg.InstallationID || m[keyCluster] != p.cfg.Cluster {
		return nil
	}
	ns, name, ok := strings.Cut(m[keyClaim], "/")
	if !ok {
		return nil
	}
	return &hypervisor.Ownership{Cluster: p.cfg.Cluster, ClaimNamespace: ns, ClaimName: name, ClaimID: m[keyClaimID]}
}

// ownerMarks are the ExtraConfig entries that make a VM o's.
func (p *Provider) ownerMarks(o hypervisor.Ownership) []types.BaseOptionValue {
	return []types.BaseOptionValue{
		&types.OptionValue{Key: keyInstallation, Value: p.cfg.InstallationID},
		&types.OptionValue{Key: keyCluster, Value: p.cfg.Cluster},
		&types.OptionValue{Key: keyClaim, Value: o.Claim()},
		&types.OptionValue{Key: keyClaimID, Value: o.ClaimID},
	}
}

// view returns the session's container view of the kinds of objects in the datacenter, making it
// on first use.
func (cn *conn) view(ctx context.Context, kinds ...string) (*view.ContainerView, error) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	key := strings.Join(kinds, ",")
	if v := cn.views[key]; v != nil {
		return v, nil
	}
	made, err := view.NewManager(cn.c).CreateContainerView(ctx, cn.dc.Reference(), kinds, true)
	if err != nil {
		return nil, err
	}
	if cn.views == nil {
		cn.views = map[string]*view.ContainerView{}
	}
	cn.views[key] = made
	return made, nil
}

// hostNames maps the hosts of the datacenter to their names, read once per session and again
// when want names a host the map does not know (a host added since).
func hostNames(ctx context.Context, cn *conn, want ...types.ManagedObjectReference) (map[types.ManagedObjectReference]string, error) {
	cn.mu.Lock()
	names := cn.hostName
	cn.mu.Unlock()
	fresh := names != nil
	for _, w := range want {
		if _, ok := names[w]; !ok {
			fresh = false
		}
	}
	if fresh {
		return names, nil
	}
	v, err := cn.view(ctx, "HostSystem")
	if err != nil {
		return nil, err
	}
	var hosts []mo.HostSystem
	if err := v.Retrieve(ctx, []string{"HostSystem"}, []string{"name"}, &hosts); err != nil {
		return nil, err
	}
	names = make(map[types.ManagedObjectReference]string, len(hosts))
	for _, h := range hosts {
		names[h.Reference()] = h.Name
	}
	cn.mu.Lock()
	cn.hostName = names
	cn.mu.Unlock()
	return names, nil
}

// hostsOf are the hosts the VMs run on.
func hostsOf(vms ...mo.VirtualMachine) []types.ManagedObjectReference {
	var out []types.ManagedObjectReference
	for _, vm := range vms {
		if vm.Runtime.Host != nil {
			out = append(out, *vm.Runtime.Host)
		}
	}
	return out
}

// toVM converts a VM's properties.
func (p *Provider) toVM(vm mo.VirtualMachine, hosts map[types.ManagedObjectReference]string) hypervisor.VM {
	out := hypervisor.VM{Name: vm.Name, State: hypervisor.PowerStateUnknown}
	if vm.Config != nil {
		out.Ref.ID = strings.ToLower(vm.Config.InstanceUuid)
		out.Template = vm.Config.Template
		out.Cores = int(vm.Config.Hardware.NumCPU)
		out.MemoryMiB = int(vm.Config.Hardware.MemoryMB)
	}
	if vm.Runtime.Host != nil {
		out.Ref.Node = hosts[*vm.Runtime.Host]
	}
	switch vm.Runtime.PowerState {
	case types.VirtualMachinePowerStatePoweredOn:
		out.State = hypervisor.PowerStateRunning
		if vm.Runtime.BootTime != nil {
			out.Uptime = time.Since(*vm.Runtime.BootTime)
		}
	case types.VirtualMachinePowerStatePoweredOff:
		out.State = hypervisor.PowerStateStopped
	case types.VirtualMachinePowerStateSuspended:
		out.State = hypervisor.PowerStatePaused
	}
	m := marksOf(vm)
	out.Tags = splitTags(m[keyTags])
	out.Owner = p.owner(m)
	return out
}

// listVMs reads every VM of the datacenter through one container view.
func listVMs(ctx context.Context, cn *conn) ([]mo.VirtualMachine, error) {
	v, err := cn.view(ctx, "VirtualMachine")
	if err != nil {
		return nil, err
	}
	var vms []mo.VirtualMachine
	if err := v.Retrieve(ctx, []string{"VirtualMachine"}, vmProps, &vms); err != nil {
		return nil, err
	}
	return vms, nil
}

// find returns the VM whose instance UUID is id, with its properties: one read when the session
// found that VM before, a search by UUID and a read otherwise.
func (p *Provider) find(ctx context.Context, cn *conn, id string) (*object.VirtualMachine, mo.VirtualMachine, error) {
	id = strings.ToLower(id)
	cn.mu.Lock()
	ref, known := cn.vmRef[id]
	cn.mu.Unlock()
	if known {
		var vm mo.VirtualMachine
		err := property.DefaultCollector(cn.c).RetrieveOne(ctx, ref, vmProps, &vm)
		if err == nil && vm.Config != nil && strings.EqualFold(vm.Config.InstanceUuid, id) {
			return object.NewVirtualMachine(cn.c, ref), vm, nil
		}
		cn.mu.Lock()
		delete(cn.vmRef, id)
		cn.mu.Unlock()
		if err != nil && !errors.Is(classify("find", err), hypervisor.ErrNotFound) {
			return nil, mo.VirtualMachine{}, err
		}
	}
	instance := true
	found, err := object.NewSearchIndex(cn.c).FindByUuid(ctx, cn.dc, id, true, &instance)
	if err != nil {
		return nil, mo.VirtualMachine{}, err
	}
	if found == nil {
		return nil, mo.VirtualMachine{}, refused(hypervisor.ErrNotFound, "find", "no VM with instance UUID %s", id)
	}
	obj := object.NewVirtualMachine(cn.c, found.Reference())
	var vm mo.VirtualMachine
	if err := property.DefaultCollector(cn.c).RetrieveOne(ctx, obj.Reference(), vmProps, &vm); err != nil {
		return nil, mo.VirtualMachine{}, err
	}
	cn.mu.Lock()
	if cn.vmRef == nil {
		cn.vmRef = map[string]types.ManagedObjectReference{}
	}
	cn.vmRef[id] = obj.Reference()
	cn.mu.Unlock()
	return obj, vm, nil
}

// owned returns the VM of ref when this installation owns it: ErrNotFound when it does not
// exist, ErrNotOwned when it is not ours (templates included).
func (p *Provider) owned(ctx context.Context, cn *conn, op string, ref hypervisor.VMRef) (*object.VirtualMachine, mo.VirtualMachine, error) {
	obj, vm, err := p.find(ctx, cn, ref.ID)
	if err != nil {
		return nil, vm, err
	}
	if (vm.Config != nil && vm.Config.Template) || p.owner(marksOf(vm)) == nil {
		return nil, vm, refused(hypervisor.ErrNotOwned, op, "VM %s (%s) does not carry this HypervisorCluster's marks", ref.ID, vm.Name)
	}
	return obj, vm, nil
}

// VM implements hypervisor.Provider.
func (p *Provider) VM(ctx context.Context, ref hypervisor.VMRef) (hypervisor.VM, error) {
	var out hypervisor.VM
	err := p.do(ctx, "VM", func(ctx context.Context, cn *conn) error {
		_, vm, err := p.find(ctx, cn, ref.ID)
		if err != nil {
			return err
		}
		hosts, err := hostNames(ctx, cn, hostsOf(vm)...)
		if err != nil {
			return err
		}
		out = p.toVM(vm, hosts)
		return nil
	})
	return out, err
}

// OwnedVMs implements hypervisor.Provider: one listing of the datacenter's VMs.
func (p *Provider) OwnedVMs(ctx context.Context) ([]hypervisor.VM, error) {
	var out []hypervisor.VM
	err := p.do(ctx, "OwnedVMs", func(ctx context.Context, cn *conn) error {
		vms, err := listVMs(ctx, cn)
		if err != nil {
			return err
		}
		hosts, err := hostNames(ctx, cn, hostsOf(vms...)...)
		if err != nil {
			return err
		}
		for _, vm := range vms {
			if v := p.toVM(vm, hosts); v.Owner != nil && !v.Template {
				out = append(out, v)
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		return nil
	})
	return out, err
}

// Addresses implements hypervisor.Provider: the addresses VMware Tools reports.
func (p *Provider) Addresses(ctx context.Context, ref hypervisor.VMRef) ([]hypervisor.Address, error) {
	var out []hypervisor.Address
	err := p.do(ctx, "Addresses", func(ctx context.Context, cn *conn) error {
		_, vm, err := p.find(ctx, cn, ref.ID)
		if err != nil {
			return err
		}
		seen := map[string]bool{}
		add := func(ip string) {
			if ip == "" || seen[ip] || strings.HasPrefix(ip, "fe80:") || strings.HasPrefix(ip, "127.") || ip == "::1" {
				return
			}
			seen[ip] = true
			out = append(out, hypervisor.Address{Type: hypervisor.AddressInternalIP, Address: ip})
		}
		if vm.Guest == nil {
			return nil
		}
		for _, nic := range vm.Guest.Net {
			for _, ip := range nic.IpAddress {
				add(ip)
			}
		}
		add(vm.Guest.IpAddress)
		return nil
	})
	return out, err
}

// Adopt implements hypervisor.Provider. vSphere VMs were never marked by an older release, so
// only a VM already marked for owner is accepted.
func (p *Provider) Adopt(ctx context.Context, ref hypervisor.VMRef, owner hypervisor.Ownership, _ string) error {
	return p.do(ctx, "Adopt", func(ctx context.Context, cn *conn) error {
		_, vm, err := p.owned(ctx, cn, "Adopt", ref)
		if err != nil {
			return err
		}
		if o := p.owner(marksOf(vm)); o.ClaimID != owner.ClaimID || o.Claim() != owner.Claim() {
			return refused(hypervisor.ErrNotOwned, "Adopt", "VM %s belongs to claim %s", ref.ID, o.Claim())
		}
		return nil
	})
}
