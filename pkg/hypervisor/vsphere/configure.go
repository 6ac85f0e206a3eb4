package vsphere

import (
	"context"
	"encoding/base64"
	"strings"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Configure implements hypervisor.Provider in one ReconfigVM task: CPUs, memory, the network
// adapters (the first NIC's port group, or the whole NIC list), the boot disk's growth, the extra
// disks, the tags and description, and the cloud-init data as guestinfo for cloud-init's VMware
// datasource. PCI devices are refused with ErrUnsupported.
func (p *Provider) Configure(ctx context.Context, ref hypervisor.VMRef, spec hypervisor.ConfigSpec) (hypervisor.TaskID, error) {
	if len(spec.PCIDevices) > 0 {
		return "", refused(hypervisor.ErrUnsupported, "Configure", "PCI passthrough is not supported on vSphere")
	}
	var tid hypervisor.TaskID
	err := p.do(ctx, "Configure", func(ctx context.Context, cn *conn) error {
		obj, vm, err := p.owned(ctx, cn, "Configure", ref)
		if err != nil {
			return err
		}
		if spec.Proven != nil {
			spec.Proven()
		}
		cs := types.VirtualMachineConfigSpec{Annotation: spec.Description}
		if spec.Cores > 0 {
			cs.NumCPUs = int32(spec.Cores)
		}
		if spec.MemoryMiB > 0 {
			cs.MemoryMB = int64(spec.MemoryMiB)
		}
		extra := []types.BaseOptionValue{&types.OptionValue{Key: keyTags, Value: strings.Join(cleanTags(spec.Tags), ",")}}
		if ci := spec.CloudInit; ci != nil {
			extra = append(extra, guestinfo(ci)...)
		}
		cs.ExtraConfig = extra
		if spec.Disk != nil || spec.Network != nil || len(spec.ExtraDisks) > 0 || len(spec.NICs) > 0 {
			var withDevices mo.VirtualMachine
			if err := property.DefaultCollector(cn.c).RetrieveOne(ctx, obj.Reference(), []string{"config.hardware.device", "datastore"}, &withDevices); err != nil {
				return err
			}
			if len(spec.ExtraDisks) > 0 {
				changes, marks, err := p.diskChanges(ctx, cn, withDevices, marksOf(vm), spec.ExtraDisks)
				if err != nil {
					return err
				}
				cs.DeviceChange = append(cs.DeviceChange, changes...)
				cs.ExtraConfig = append(cs.ExtraConfig, marks...)
			}
			if len(spec.NICs) > 0 {
				changes, err := p.nicChanges(ctx, cn, withDevices, spec.NICs)
				if err != nil {
					return err
				}
				cs.DeviceChange = append(cs.DeviceChange, changes...)
				spec.Network = nil
			}
			if spec.Disk != nil {
				if d := bootDisk(withDevices); d != nil && d.CapacityInKB < int64(spec.Disk.SizeGiB)<<20 {
					d.CapacityInKB = int64(spec.Disk.SizeGiB) << 20
					d.CapacityInBytes = d.CapacityInKB << 10
					cs.DeviceChange = append(cs.DeviceChange, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: d})
				}
			}
			if spec.Network != nil && spec.Network.Name != "" {
				change, err := p.networkChange(ctx, cn, withDevices, spec.Network)
				if err != nil {
					return err
				}
				if change != nil {
					cs.DeviceChange = append(cs.DeviceChange, change)
				}
			}
		}
		t, err := obj.Reconfigure(ctx, cs)
		if err != nil {
			return err
		}
		tid = taskID(t)
		return nil
	})
	return tid, err
}

// guestinfo is the cloud-init data as cloud-init's VMware datasource reads it: user-data,
// meta-data (with the network config inside it) and vendor-data, each base64-encoded.
func guestinfo(ci *hypervisor.CloudInitData) []types.BaseOptionValue {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	meta := ci.MetaData
	if ci.NetworkConfig != "" {
		meta = strings.TrimRight(meta, "\n") + "\nnetwork: " + b64(ci.NetworkConfig) + "\nnetwork.encoding: base64\n"
	}
	out := []types.BaseOptionValue{
		&types.OptionValue{Key: keyUserData, Value: b64(ci.UserData)},
		&types.OptionValue{Key: keyUserDataEncoding, Value: "base64"},
		&types.OptionValue{Key: keyMetaData, Value: b64(meta)},
		&types.OptionValue{Key: keyMetaDataEncoding, Value: "base64"},
	}
	if ci.VendorData != "" {
		out = append(out, &types.OptionValue{Key: keyVendorData, Value: b64(ci.VendorData)},
			&types.OptionValue{Key: keyVendorEncoding, Value: "base64"})
	}
	return out
}

// networkChange points the VM's first NIC at the port group (standard or distributed) named in
// spec; nil when it already is.
func (p *Provider) networkChange(ctx context.Context, cn *conn, vm mo.VirtualMachine, spec *hypervisor.NetworkSpec) (types.BaseVirtualDeviceConfigSpec, error) {
	if spec.VLAN != 0 {
		return nil, refused(hypervisor.ErrUnsupported, "Configure", "vSphere VLANs belong to the port group: name a port group with VLAN %d instead of a VLAN tag", spec.VLAN)
	}
	f := find.NewFinder(cn.c, true)
	f.SetDatacenter(cn.dc)
	net, err := f.Network(ctx, spec.Name)
	if err != nil {
		return nil, refused(hypervisor.ErrInvalid, "Configure", "port group %q: %v", spec.Name, err)
	}
	backing, err := net.EthernetCardBackingInfo(ctx)
	if err != nil {
		return nil, err
	}
	if vm.Config == nil {
		return nil, nil
	}
	for _, d := range vm.Config.Hardware.Device {
		nic, ok := d.(types.BaseVirtualEthernetCard)
		if !ok {
			continue
		}
		card := nic.GetVirtualEthernetCard()
		card.Backing = backing
		return &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: d}, nil
	}
	return nil, refused(hypervisor.ErrInvalid, "Configure", "the VM has no network adapter to attach to %q", spec.Name)
}

// EjectCloudInit implements hypervisor.Provider: the guestinfo keys holding the bootstrap data are
// removed, so the spent join token is no longer readable in the VM's configuration.
func (p *Provider) EjectCloudInit(ctx context.Context, ref hypervisor.VMRef) error {
	return p.do(ctx, "EjectCloudInit", func(ctx context.Context, cn *conn) error {
		obj, vm, err := p.owned(ctx, cn, "EjectCloudInit", ref)
		if err != nil {
			return err
		}
		m := marksOf(vm)
		var extra []types.BaseOptionValue
		for _, k := range []string{keyUserData, keyUserDataEncoding, keyMetaData, keyMetaDataEncoding, keyVendorData, keyVendorEncoding} {
			if _, ok := m[k]; ok {
				extra = append(extra, &types.OptionValue{Key: k, Value: ""})
			}
		}
		if len(extra) == 0 {
			return nil
		}
		t, err := obj.Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: extra})
		if err != nil {
			return err
		}
		return t.Wait(ctx)
	})
}
