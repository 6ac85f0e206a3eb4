package vsphere

import (
	"context"
	"slices"
	"sort"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

var (
	_ hypervisor.Migrator         = (*Provider)(nil)
	_ hypervisor.MigrationChecker = (*Provider)(nil)
)

// Migrate implements hypervisor.Migrator with vMotion (RelocateVM_Task): the VM moves to the
// target host of the compute cluster, its disks staying on their datastores, which the target
// must see. A running VM needs spec.Online; a move to the VM's own host is refused.
func (p *Provider) Migrate(ctx context.Context, ref hypervisor.VMRef, spec hypervisor.MigrateSpec) (hypervisor.TaskID, error) {
	var tid hypervisor.TaskID
	err := p.do(ctx, "Migrate", func(ctx context.Context, cn *conn) error {
		obj, vm, err := p.owned(ctx, cn, "Migrate", ref)
		if err != nil {
			return err
		}
		target, err := p.host(ctx, cn, spec.Target)
		if err != nil {
			return err
		}
		if vm.Runtime.Host != nil && *vm.Runtime.Host == *target {
			return refused(hypervisor.ErrInvalid, "Migrate", "VM %s already runs on %s", ref.ID, spec.Target)
		}
		if vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn && !spec.Online {
			return refused(hypervisor.ErrInvalid, "Migrate", "VM %s runs: an offline move needs it stopped", ref.ID)
		}
		pool := cn.pool.Reference()
		t, err := obj.Relocate(ctx, types.VirtualMachineRelocateSpec{Host: target, Pool: &pool}, types.VirtualMachineMovePriorityDefaultPriority)
		if err != nil {
			return err
		}
		tid = taskID(t)
		return nil
	})
	return tid, err
}

// CancelTask implements hypervisor.Migrator: vCenter cancels a vMotion that has not reached its
// switch-over; the VM then stays on its source host.
func (p *Provider) CancelTask(ctx context.Context, _ string, id hypervisor.TaskID) error {
	return p.do(ctx, "CancelTask", func(ctx context.Context, cn *conn) error {
		return object.NewTask(cn.c, types.ManagedObjectReference{Type: "Task", Value: string(id)}).Cancel(ctx)
	})
}

// CheckMigration implements hypervisor.MigrationChecker: disks on a datastore some other host of
// the cluster does not mount are local, PCI passthrough devices are host resources, and the hosts
// it could go to are the cluster's other connected hosts outside maintenance mode.
func (p *Provider) CheckMigration(ctx context.Context, ref hypervisor.VMRef) (hypervisor.Migratability, error) {
	var out hypervisor.Migratability
	err := p.do(ctx, "CheckMigration", func(ctx context.Context, cn *conn) error {
		obj, vm, err := p.owned(ctx, cn, "CheckMigration", ref)
		if err != nil {
			return err
		}
		out.Running = vm.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn
		var cluster mo.ClusterComputeResource
		pc := property.DefaultCollector(cn.c)
		if err := pc.RetrieveOne(ctx, cn.cluster.Reference(), []string{"host"}, &cluster); err != nil {
			return err
		}
		var hosts []mo.HostSystem
		if len(cluster.Host) > 0 {
			if err := pc.Retrieve(ctx, cluster.Host, []string{"name", "runtime"}, &hosts); err != nil {
				return err
			}
		}
		var others []types.ManagedObjectReference
		for _, h := range hosts {
			if vm.Runtime.Host != nil && h.Reference() == *vm.Runtime.Host {
				continue
			}
			if h.Runtime.ConnectionState == types.HostSystemConnectionStateConnected && !h.Runtime.InMaintenanceMode {
				out.AllowedHosts = append(out.AllowedHosts, h.Name)
				others = append(others, h.Reference())
			}
		}
		sort.Strings(out.AllowedHosts)
		var devices mo.VirtualMachine
		if err := pc.RetrieveOne(ctx, obj.Reference(), []string{"config.hardware.device"}, &devices); err != nil {
			return err
		}
		mounts := map[types.ManagedObjectReference][]types.ManagedObjectReference{}
		for _, d := range devices.Config.Hardware.Device {
			switch dev := d.(type) {
			case *types.VirtualPCIPassthrough:
				out.LocalResources = append(out.LocalResources, dev.DeviceInfo.GetDescription().Label)
			case *types.VirtualDisk:
				b, ok := dev.Backing.(types.BaseVirtualDeviceFileBackingInfo)
				if !ok || b.GetVirtualDeviceFileBackingInfo().Datastore == nil {
					continue
				}
				ds := *b.GetVirtualDeviceFileBackingInfo().Datastore
				if _, read := mounts[ds]; !read {
					var store mo.Datastore
					if err := pc.RetrieveOne(ctx, ds, []string{"host"}, &store); err != nil {
						return err
					}
					for _, m := range store.Host {
						mounts[ds] = append(mounts[ds], m.Key)
					}
				}
				for _, h := range others {
					if !slices.Contains(mounts[ds], h) {
						out.LocalDisks = append(out.LocalDisks, dev.DeviceInfo.GetDescription().Label)
						break
					}
				}
			}
		}
		return nil
	})
	return out, err
}
