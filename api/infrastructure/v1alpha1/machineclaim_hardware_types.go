package v1alpha1

// DiskBus is the controller an extra disk is attached to.
// +kubebuilder:validation:Enum=scsi;virtio;sata
type DiskBus string

const (
	DiskBusSCSI   DiskBus = "scsi"
	DiskBusVirtIO DiskBus = "virtio"
	DiskBusSATA   DiskBus = "sata"
)

// MaxExtraDisks bounds spec.disks.
const MaxExtraDisks = 8

// ExtraDisk is an empty disk created with the VM, besides the template's boot disk.
type ExtraDisk struct {
	// name identifies the disk. On Proxmox VE it is also the disk's serial number, so the guest
	// finds it as /dev/disk/by-id/*_<name> whatever the order the kernel probes the disks in.
	// Hyper-V has no disk serial number: there the name is part of the disk's VHDX file name, and
	// the guest finds the i-th disk of spec.disks at LUN i+1 of the first SCSI controller.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// sizeGiB of the new disk.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	SizeGiB int32 `json:"sizeGiB"`

	// storage holds the disk; default the storage of the VM's boot disk (spec.proxmox.storage
	// for a Full clone, the template's storage for a linked clone). Proxmox VE only: on Hyper-V
	// extra disks go to the HypervisorCluster's VHD folder, and a claim naming a storage fails.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-zA-Z][a-zA-Z0-9\-_.]*$`
	Storage string `json:"storage,omitempty"`

	// bus the disk is attached to: scsi (default), virtio or sata. Hyper-V has SCSI only and
	// fails a claim asking for virtio or sata.
	// +optional
	// +kubebuilder:default=scsi
	Bus DiskBus `json:"bus,omitempty"`
}

// MaxNICs bounds spec.nics.
const MaxNICs = 8

// NIC is one network interface of the VM. The first NIC of spec.nics is the VM's first interface
// (Proxmox net0, Hyper-V's first network adapter), the second net1, and so on.
// +kubebuilder:validation:XValidation:rule="!has(self.ipv4) || !has(self.ipv4.gateway) || ip(self.ipv4.gateway).family() == 4",message="ipv4.gateway must be an IPv4 address"
// +kubebuilder:validation:XValidation:rule="!has(self.ipv6) || !has(self.ipv6.gateway) || ip(self.ipv6.gateway).family() == 6",message="ipv6.gateway must be an IPv6 address"
// +kubebuilder:validation:XValidation:rule="!has(self.ipv4) || !has(self.ipv4PoolRef)",message="set either ipv4 (a static address) or ipv4PoolRef (an address from an IPAM pool), not both"
// +kubebuilder:validation:XValidation:rule="!has(self.ipv6) || !has(self.ipv6PoolRef)",message="set either ipv6 (a static address) or ipv6PoolRef (an address from an IPAM pool), not both"
// +kubebuilder:validation:XValidation:rule="!has(self.ipv4) || cidr(self.ipv4.address).ip().family() == 4",message="ipv4.address must be an IPv4 address with its prefix length, such as 192.0.2.10/24"
// +kubebuilder:validation:XValidation:rule="!has(self.ipv6) || cidr(self.ipv6.address).ip().family() == 6",message="ipv6.address must be an IPv6 address with its prefix length, such as 2001:db8::10/64"
// +kubebuilder:validation:XValidation:rule="!has(self.network) || !(has(self.bridge) || has(self.vlan) || has(self.firewall) || has(self.mtu))",message="a NIC on a network takes its bridge, VLAN, firewall and MTU from the VMNetwork: remove bridge, vlan, firewall and mtu"
// +kubebuilder:validation:XValidation:rule="!has(self.network) || !(has(self.ipv4) || has(self.ipv4PoolRef))",message="a NIC on a network takes its IPv4 address from the VMNetwork's IPAM: remove ipv4 and ipv4PoolRef"
type NIC struct {
	// name of the interface in the guest: cloud-init's network-config finds the NIC by its MAC
	// address and gives it this name. Unique in the claim.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9-]*$`
	Name string `json:"name"`

	// network is a VMNetwork the NIC attaches to: the NIC gets the network's bridge, VLAN,
	// security policy, bandwidth cap and MTU, and an IPv4 address from its IPAM range. A network
	// of another namespace is usable only when it lists this namespace in allowedNamespaces.
	// +optional
	Network *VMNetworkReference `json:"network,omitempty"`

	// bridge the NIC attaches to: a Proxmox bridge (default vmbr0), or on Hyper-V the virtual
	// switch, which must be given.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`
	Bridge string `json:"bridge,omitempty"`

	// vlan tag of the NIC; unset for an untagged port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4094
	VLAN *int32 `json:"vlan,omitempty"`

	// model of the virtual NIC; default virtio. Hyper-V gives synthetic adapters only and fails a
	// claim asking for another model.
	// +optional
	// +kubebuilder:validation:Enum=virtio;e1000;e1000e;rtl8139;vmxnet3
	Model string `json:"model,omitempty"`

	// firewall turns Proxmox's firewall on for this NIC (the VM's and the cluster's rules apply).
	// Hyper-V has no such firewall and fails a claim asking for it.
	// +optional
	Firewall bool `json:"firewall,omitempty"`

	// mtu of the NIC; unset takes the bridge's. On Hyper-V only the guest sets it, from its
	// network-config.
	// +optional
	// +kubebuilder:validation:Minimum=576
	// +kubebuilder:validation:Maximum=65520
	MTU *int32 `json:"mtu,omitempty"`

	// ipv4 is a static IPv4 address; without it (and without an IPAM pool) the NIC asks DHCP.
	// +optional
	IPv4 *StaticAddress `json:"ipv4,omitempty"`

	// ipv6 is a static IPv6 address; without it the NIC takes router advertisements.
	// +optional
	IPv6 *StaticAddress `json:"ipv6,omitempty"`

	// ipv4PoolRef is a Cluster API IPAM pool in this namespace (an InClusterIPPool, say) to take
	// the NIC's IPv4 address from: HyperFleet claims one (an IPAddressClaim owned by this claim),
	// waits for the IPAM provider to allocate it, and releases it when the claim is deleted.
	// +optional
	IPv4PoolRef *IPPoolReference `json:"ipv4PoolRef,omitempty"`

	// ipv6PoolRef is ipv4PoolRef for the NIC's IPv6 address.
	// +optional
	IPv6PoolRef *IPPoolReference `json:"ipv6PoolRef,omitempty"`
}

// VMNetworkReference names a VMNetwork.
type VMNetworkReference struct {
	// name of the VMNetwork.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// namespace of the VMNetwork; default the claim's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`
}

// VMStorageRequest places a VM's disks on a VMStorage, named or by tier.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.tier)",message="set either name (one VMStorage) or tier (any VMStorage of that tier), not both"
// +kubebuilder:validation:XValidation:rule="!has(self.namespace) || has(self.name)",message="namespace goes with name: a tier is looked for in the claim's namespace and in the storages shared with it"
type VMStorageRequest struct {
	// name of a VMStorage.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name,omitempty"`

	// namespace of the named VMStorage; default the claim's.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`

	// tier asks for any VMStorage of that tier (spec.tier) that is on the claim's hypervisor and
	// has room for the VM's disks on the chosen node.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Tier string `json:"tier,omitempty"`
}

// IPPoolReference names a Cluster API IPAM pool in the claim's namespace.
type IPPoolReference struct {
	// apiGroup of the pool, such as ipam.cluster.x-k8s.io.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	APIGroup string `json:"apiGroup"`

	// kind of the pool, such as InClusterIPPool.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$`
	Kind string `json:"kind"`

	// name of the pool.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// StaticAddress is an address with its prefix length, and the default gateway through it.
type StaticAddress struct {
	// address with its prefix length: 192.0.2.10/24, 2001:db8::10/64.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="address must be an IP address with its prefix length, such as 192.0.2.10/24"
	Address string `json:"address"`

	// gateway is the default route's next hop; unset adds no default route for this family.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="gateway must be an IP address"
	Gateway string `json:"gateway,omitempty"`
}

// DNSSpec is the guest's resolver configuration.
type DNSSpec struct {
	// nameservers the guest asks.
	// +optional
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.all(a, isIP(a))",message="nameservers must be IP addresses"
	Nameservers []string `json:"nameservers,omitempty"`

	// searchDomains appended to short names.
	// +optional
	// +kubebuilder:validation:MaxItems=6
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SearchDomains []string `json:"searchDomains,omitempty"`
}

// MachineClaimHardwareSpec is the hardware a VM gets besides the template's: extra disks and
// network interfaces.
// Hardware is created with the VM and cannot change afterwards: HyperFleet never resizes, removes
// or hot-adds a disk of an existing VM.
type MachineClaimHardwareSpec struct {
	// disks are empty disks created with the VM and destroyed with it (Proxmox VE volumes,
	// Hyper-V dynamic VHDX files). A claim with disks on a provider without extra disks is
	// refused (reason UnsupportedHardware).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Disks []ExtraDisk `json:"disks,omitempty"`

	// nics are the VM's network interfaces, in order, with their addresses; they replace
	// spec.network (which configures the first NIC only) and every NIC of the template. Their
	// addresses reach the guest in cloud-init's network-config. A claim with nics on a provider
	// without them is refused (reason UnsupportedHardware).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	NICs []NIC `json:"nics,omitempty"`

	// dns is the guest's resolver configuration, given with nics.
	// +optional
	DNS *DNSSpec `json:"dns,omitempty"`
}

// PCIDevice passes a host PCI device (a GPU, say) through to the VM by a Proxmox cluster resource
// mapping, which names the device on each node that has one.
type PCIDevice struct {
	// mapping is the name of the cluster's PCI resource mapping (Datacenter, Resource Mappings).
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-zA-Z][a-zA-Z0-9_-]+$`
	Mapping string `json:"mapping"`

	// pcie attaches the device to a PCI Express port (the VM needs the q35 machine type).
	// +optional
	PCIe bool `json:"pcie,omitempty"`

	// primaryGPU makes the device the VM's primary display (PVE's x-vga).
	// +optional
	PrimaryGPU bool `json:"primaryGPU,omitempty"`
}

// MachineClaim reasons of the hardware settings.
const (
	// UnsupportedHardwareReason: the claim asks for hardware its HypervisorCluster's provider
	// cannot give (extra disks or NICs on a provider without them); no VM is made until the claim
	// or the cluster changes.
	UnsupportedHardwareReason = "UnsupportedHardware"
	// WaitingForIPAddressReason: an IPAddressClaim of the claim waits for its IPAM provider to
	// allocate an address; the VM is not made before every address is known.
	WaitingForIPAddressReason = "WaitingForIPAddress"
	// IPAddressInvalidReason: an IPAM provider's answer cannot be used (an IPAddress not made for
	// the claim's IPAddressClaim or pool, or with a malformed address, prefix or gateway).
	IPAddressInvalidReason = "IPAddressInvalid"
	// IPAddressClaimConflictReason: an IPAddressClaim of the name HyperFleet would use exists
	// and is not this claim's.
	IPAddressClaimConflictReason = "IPAddressClaimConflict"
	// NetworkNotFoundReason: a NIC names a VMNetwork that does not exist.
	NetworkNotFoundReason = "NetworkNotFound"
	// NetworkNotAllowedReason: a NIC names a VMNetwork of another namespace that does not list the
	// claim's namespace in spec.allowedNamespaces; no VM is made.
	NetworkNotAllowedReason = "NetworkNotAllowed"
	// WaitingForNetworkReason: a NIC's VMNetwork is not ready on the claim's hypervisor yet.
	WaitingForNetworkReason = "WaitingForNetwork"
	// StorageNotFoundReason: spec.storage names a VMStorage that does not exist, or no VMStorage
	// of the tier is shared with the claim's namespace.
	StorageNotFoundReason = "StorageNotFound"
	// StorageNotAllowedReason: spec.storage names a VMStorage of another namespace that does not
	// list the claim's namespace in spec.allowedNamespaces.
	StorageNotAllowedReason = "StorageNotAllowed"
	// WaitingForStorageReason: no VMStorage asked for is ready on the claim's hypervisor with room
	// for the VM's disks on a node it may use.
	WaitingForStorageReason = "WaitingForStorage"
)
