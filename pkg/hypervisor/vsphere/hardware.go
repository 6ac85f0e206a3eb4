package vsphere

import (
	"context"
	"fmt"
	"strings"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// keyDiskPrefix marks an extra disk HyperFleet made: hyperfleet.disk.<name> = its device label,
// written in the same reconfiguration that adds the disk, so applying the spec again adds nothing.
const keyDiskPrefix = "hyperfleet.disk."

var _ hypervisor.HardwareChecker = (*Provider)(nil)

// CheckHardware implements hypervisor.HardwareChecker: what vSphere has no place for is refused
// before any VM is made, with the same reasons Configure gives.
func (p *Provider) CheckHardware(spec hypervisor.ConfigSpec) error {
	if len(spec.PCIDevices) > 0 {
		return refused(hypervisor.ErrUnsupported, "Configure", "PCI passthrough is not supported on vSphere")
	}
	for _, d := range spec.ExtraDisks {
		if err := checkDisk(d); err != nil {
			return err
		}
	}
	for i, nic := range spec.NICs {
		if err := checkNIC(i, nic); err != nil {
			return err
		}
	}
	if n := spec.Network; n != nil && n.VLAN != 0 && len(spec.NICs) == 0 {
		return refused(hypervisor.ErrUnsupported, "Configure", "vSphere VLANs belong to the port group: name a port group with VLAN %d instead of a VLAN tag", n.VLAN)
	}
	return nil
}

func checkDisk(d hypervisor.ExtraDisk) error {
	if d.Bus != "" && d.Bus != "scsi" {
		return refused(hypervisor.ErrUnsupported, "Configure", "disk %s: bus %s; vSphere disks here are SCSI", d.Name, d.Bus)
	}
	if d.SizeGiB <= 0 {
		return refused(hypervisor.ErrInvalid, "Configure", "disk %s has no size", d.Name)
	}
	return nil
}

func checkNIC(i int, nic hypervisor.NIC) error {
	switch {
	case nic.VLAN != 0:
		return refused(hypervisor.ErrUnsupported, "Configure", "NIC %d: vSphere VLANs belong to the port group; name a port group with VLAN %d instead of a VLAN tag", i, nic.VLAN)
	case nic.Firewall:
		return refused(hypervisor.ErrUnsupported, "Configure", "NIC %d: vSphere has no per-NIC firewall flag; use the port group's security policy or NSX", i)
	case nic.Bridge == "":
		return refused(hypervisor.ErrInvalid, "Configure", "NIC %d names no port group", i)
	case nic.Policy != nil && (nic.Policy.SecurityGroup != "" || len(nic.Policy.Rules) > 0):
		return refused(hypervisor.ErrUnsupported, "Configure", "NIC %d: vSphere has no distributed firewall without NSX", i)
	case nic.Policy != nil && nic.Policy.RateMbps < 0:
		return refused(hypervisor.ErrInvalid, "Configure", "NIC %d: a negative bandwidth cap", i)
	}
	return nil
}

// diskChanges adds the extra disks the VM does not carry yet, thin-provisioned on the first SCSI
// controller, on the named datastore or the boot disk's.
func (p *Provider) diskChanges(ctx context.Context, cn *conn, vm mo.VirtualMachine, marks marks, disks []hypervisor.ExtraDisk) ([]types.BaseVirtualDeviceConfigSpec, []types.BaseOptionValue, error) {
	devices := object.VirtualDeviceList(vm.Config.Hardware.Device)
	var changes []types.BaseVirtualDeviceConfigSpec
	var extra []types.BaseOptionValue
	for _, d := range disks {
		if _, made := marks[keyDiskPrefix+d.Name]; made {
			continue
		}
		if err := checkDisk(d); err != nil {
			return nil, nil, err
		}
		ctrl := devices.PickController((*types.VirtualSCSIController)(nil))
		if ctrl == nil {
			return nil, nil, refused(hypervisor.ErrInvalid, "Configure", "the VM has no SCSI controller with a free slot for disk %s", d.Name)
		}
		ds, err := p.diskDatastore(ctx, cn, vm, d.Storage)
		if err != nil {
			return nil, nil, err
		}
		disk := devices.CreateDisk(ctrl, ds, "")
		disk.CapacityInKB = int64(d.SizeGiB) << 20
		if b, ok := disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok {
			b.ThinProvisioned = types.NewBool(true)
		}
		devices = append(devices, disk)
		changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd,
			FileOperation: types.VirtualDeviceConfigSpecFileOperationCreate, Device: disk})
		extra = append(extra, &types.OptionValue{Key: keyDiskPrefix + d.Name, Value: fmt.Sprintf("scsi%d:%d", ctrl.GetVirtualController().BusNumber, *disk.UnitNumber)})
	}
	return changes, extra, nil
}

// diskDatastore is the datastore named name, or the boot disk's when name is empty.
func (p *Provider) diskDatastore(ctx context.Context, cn *conn, vm mo.VirtualMachine, name string) (types.ManagedObjectReference, error) {
	if name == "" {
		if d := bootDisk(vm); d != nil {
			if b, ok := d.Backing.(types.BaseVirtualDeviceFileBackingInfo); ok && b.GetVirtualDeviceFileBackingInfo().Datastore != nil {
				return *b.GetVirtualDeviceFileBackingInfo().Datastore, nil
			}
		}
		if len(vm.Datastore) > 0 {
			return vm.Datastore[0], nil
		}
		return types.ManagedObjectReference{}, refused(hypervisor.ErrInvalid, "Configure", "the VM has no datastore for its extra disks; name one")
	}
	f := find.NewFinder(cn.c, true)
	f.SetDatacenter(cn.dc)
	ds, err := f.Datastore(ctx, name)
	if err != nil {
		return types.ManagedObjectReference{}, refused(hypervisor.ErrInvalid, "Configure", "datastore %q: %v", name, err)
	}
	return ds.Reference(), nil
}

// nicChanges makes the VM's network adapters exactly nics, in order: the first adapters are
// pointed at their port groups (standard or distributed) with their MACs, missing ones added
// (vmxnet3 unless a model is named), and the template's beyond them removed. The bandwidth caps
// of the NICs' networks are written to their port groups first (qos.go).
func (p *Provider) nicChanges(ctx context.Context, cn *conn, vm mo.VirtualMachine, nics []hypervisor.NIC) ([]types.BaseVirtualDeviceConfigSpec, error) {
	devices := object.VirtualDeviceList(vm.Config.Hardware.Device)
	cards := devices.SelectByType((*types.VirtualEthernetCard)(nil))
	var changes []types.BaseVirtualDeviceConfigSpec
	f := find.NewFinder(cn.c, true)
	f.SetDatacenter(cn.dc)
	rates := map[types.ManagedObjectReference]int{}
	for i, nic := range nics {
		if err := checkNIC(i, nic); err != nil {
			return nil, err
		}
		net, err := f.Network(ctx, nic.Bridge)
		if err != nil {
			return nil, refused(hypervisor.ErrInvalid, "Configure", "NIC %d: port group %q: %v", i, nic.Bridge, err)
		}
		if nic.Policy != nil {
			ref := net.Reference()
			if rate, seen := rates[ref]; seen && rate != nic.Policy.RateMbps {
				return nil, refused(hypervisor.ErrInvalid, "Configure", "NIC %d: port group %s caps each NIC at one rate, not %d and %d Mbps", i, nic.Bridge, rate, nic.Policy.RateMbps)
			}
			switch {
			case ref.Type == "DistributedVirtualPortgroup":
				rates[ref] = nic.Policy.RateMbps
			case nic.Policy.RateMbps > 0:
				return nil, refused(hypervisor.ErrUnsupported, "Configure", "NIC %d: %s is not a distributed port group: HyperFleet caps bandwidth on its own port groups only", i, nic.Bridge)
			}
		}
		backing, err := net.EthernetCardBackingInfo(ctx)
		if err != nil {
			return nil, err
		}
		if i < len(cards) {
			card := cards[i].(types.BaseVirtualEthernetCard).GetVirtualEthernetCard()
			card.Backing = backing
			if nic.MAC != "" {
				card.AddressType, card.MacAddress = string(types.VirtualEthernetCardMacTypeManual), strings.ToLower(nic.MAC)
			}
			changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: cards[i]})
			continue
		}
		model := nic.Model
		if model == "" || model == "virtio" {
			model = "vmxnet3"
		}
		dev, err := devices.CreateEthernetCard(model, backing)
		if err != nil {
			return nil, refused(hypervisor.ErrInvalid, "Configure", "NIC %d: %v", i, err)
		}
		if nic.MAC != "" {
			card := dev.(types.BaseVirtualEthernetCard).GetVirtualEthernetCard()
			card.AddressType, card.MacAddress = string(types.VirtualEthernetCardMacTypeManual), strings.ToLower(nic.MAC)
		}
		changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: dev})
	}
	for _, extra := range cards[min(len(nics), len(cards)):] {
		changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationRemove, Device: extra})
	}
	if err := p.applyRates(ctx, cn, rates); err != nil {
		return nil, err
	}
	return changes, nil
}
