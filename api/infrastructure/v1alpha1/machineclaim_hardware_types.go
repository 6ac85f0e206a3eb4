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
	// name identifies the disk. It is also the disk's serial number, so the guest finds it as
	// /dev/disk/by-id/*_<name> whatever the order the kernel probes the disks in.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=20
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// sizeGiB of the new disk.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	SizeGiB int32 `json:"sizeGiB"`

	// storage holds the disk; default the storage of the VM's boot disk (spec.proxmox.storage
	// for a Full clone, the template's storage for a linked clone).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-zA-Z][a-zA-Z0-9\-_.]*$`
	Storage string `json:"storage,omitempty"`

	// bus the disk is attached to: scsi (default), virtio or sata.
	// +optional
	// +kubebuilder:default=scsi
	Bus DiskBus `json:"bus,omitempty"`
}

// MachineClaimHardwareSpec is the hardware a VM gets besides the template's: extra disks.
// Hardware is created with the VM and cannot change afterwards: HyperFleet never resizes, removes
// or hot-adds a disk of an existing VM.
type MachineClaimHardwareSpec struct {
	// disks are empty disks created with the VM and destroyed with it. Proxmox VE only; a claim
	// with disks on a provider without extra disks is refused (reason UnsupportedHardware).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Disks []ExtraDisk `json:"disks,omitempty"`
}

// MachineClaim reasons of the hardware settings.
const (
	// UnsupportedHardwareReason: the claim asks for hardware its HypervisorCluster's provider
	// cannot give (extra disks on Hyper-V); no VM is made until the claim or the cluster changes.
	UnsupportedHardwareReason = "UnsupportedHardware"
)
