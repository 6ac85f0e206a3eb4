package builder

import infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"

// WithDisks adds extra disks.
func (b *MachineClaimBuilder) WithDisks(disks ...infrav1.ExtraDisk) *MachineClaimBuilder {
	b.obj.Spec.Disks = append(b.obj.Spec.Disks, disks...)
	return b
}

// WithNICs sets the VM's network interfaces.
func (b *MachineClaimBuilder) WithNICs(nics ...infrav1.NIC) *MachineClaimBuilder {
	b.obj.Spec.NICs = append(b.obj.Spec.NICs, nics...)
	return b
}

// WithDNS sets the guest's resolvers and search domains.
func (b *MachineClaimBuilder) WithDNS(nameservers []string, search ...string) *MachineClaimBuilder {
	b.obj.Spec.DNS = &infrav1.DNSSpec{Nameservers: nameservers, SearchDomains: search}
	return b
}

// WithPCIDevices passes host PCI devices through by their Proxmox resource mappings.
func (b *MachineClaimBuilder) WithPCIDevices(devs ...infrav1.PCIDevice) *MachineClaimBuilder {
	if b.obj.Spec.Proxmox == nil {
		b.obj.Spec.Proxmox = &infrav1.ProxmoxMachineParameters{}
	}
	b.obj.Spec.Proxmox.PCIDevices = append(b.obj.Spec.Proxmox.PCIDevices, devs...)
	return b
}

// WithStorage places the claim's disks on a VMStorage, named or by tier.
func (b *MachineClaimBuilder) WithStorage(req *infrav1.VMStorageRequest) *MachineClaimBuilder {
	b.obj.Spec.Storage = req
	return b
}
