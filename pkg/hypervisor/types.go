package hypervisor

import (
	"fmt"
	"time"
)

// PowerState is a VM's power state as HyperFleet understands it.
type PowerState string

const (
	PowerStateRunning PowerState = "Running"
	PowerStateStopped PowerState = "Stopped"
	PowerStatePaused  PowerState = "Paused"
	PowerStateUnknown PowerState = "Unknown"
)

// VMRef identifies a VM on a hypervisor cluster: the host it lives on and the provider's opaque
// VM ID. The ID's form belongs to the provider (Proxmox: the VMID in decimal, "105"; Hyper-V: the
// VM's GUID in lower case); callers only store, compare and print it. Node is the host the VM was
// last seen on; a provider whose IDs are unique cluster-wide may ignore it when addressing the VM.
type VMRef struct {
	Node string
	ID   string
}

func (r VMRef) String() string { return r.Node + "/" + r.ID }

// IsZero reports whether the reference points at no VM.
func (r VMRef) IsZero() bool { return r.ID == "" }

// Capabilities says which optional behaviours a provider has, so controllers ask instead of
// assuming Proxmox.
type Capabilities struct {
	// LinkedClones: a clone may share its template's disk copy-on-write (a Proxmox linked clone,
	// a Hyper-V differencing disk) instead of copying it.
	LinkedClones bool
	// PreallocatedIDs: the caller chooses a new VM's ID before cloning, with NextID, and passes it
	// in CloneSpec.Target.ID (Proxmox). Without it the ID exists only once Clone has created the
	// VM (Hyper-V): Clone returns it, and a caller that lost it (a restart mid-create) finds the
	// VM again among OwnedVMs by its ownership (Owner.ClaimID) and deterministic name.
	PreallocatedIDs bool
	// AsyncTasks: long operations return a TaskID to poll with TaskStatus. Without it every
	// Provider operation is done when it returns and returns the empty TaskID; work the
	// hypervisor goes on with after an optional interface's call returns (a Hyper-V checkpoint
	// merge or move) may still come back as a TaskID to poll.
	AsyncTasks bool
	// Tags: VMs carry hypervisor tags (Proxmox), used for ownership marks and template selection.
	// Without it ownership lives in the VM's notes only (Hyper-V), ConfigSpec.Tags are kept there
	// too, and VM.Tags and Template.Tags report them back.
	Tags bool
	// ExtraDisks: Configure creates ConfigSpec.ExtraDisks (Proxmox, Hyper-V). A provider without it
	// refuses a ConfigSpec that has any with ErrUnsupported.
	ExtraDisks bool
	// StartOnConfigure: Configure honours ConfigSpec.Start (Proxmox). Without it the caller
	// starts the VM itself.
	StartOnConfigure bool
	// Storages: Clone puts a full copy on CloneSpec.Storage and Configure makes extra disks on
	// ExtraDisk.Storage, storages the provider's Storager defines or adopts (a Proxmox storage
	// ID, a Hyper-V directory storage). A provider without it refuses a CloneSpec or ExtraDisk
	// naming a storage with ErrUnsupported.
	Storages bool
	// NICs: Configure gives the VM ConfigSpec.NICs, with their MACs (Proxmox with their firewall
	// flag and MTU; Hyper-V refuses the firewall flag and leaves the MTU to the guest's
	// network-config). A provider without it refuses a ConfigSpec that has any with ErrUnsupported.
	NICs bool
}

// Ownership is the metadata HyperFleet stamps on every VM it creates. A VM without it is foreign and
// is never changed.
type Ownership struct {
	// Cluster names the owning HypervisorCluster (namespace/name) for people; the provider's
	// installation identity, not this name, decides ownership.
	Cluster string
	// ClaimNamespace and ClaimName name the MachineClaim the VM belongs to.
	ClaimNamespace string
	ClaimName      string
	// ClaimID is the MachineClaim's spec.claimID: a recreated claim with the same name owns a
	// different VM, and a claim moved to another management cluster keeps its VM.
	ClaimID string
	// Legacy is set on a VM marked by a HyperFleet release before installation identities: its
	// marks name the HypervisorCluster by namespace/name only, which another installation may
	// share. Such a VM is never changed or swept; the claim that tracks it adopts it (Adopt).
	Legacy bool
	// LegacyClaimUID is the claim's metadata.uid a Legacy VM carries.
	LegacyClaimUID string
}

// Claim returns "namespace/name" of the owning claim.
func (o Ownership) Claim() string { return o.ClaimNamespace + "/" + o.ClaimName }

// VM is the state of one VM as the hypervisor reports it.
type VM struct {
	Ref      VMRef
	Name     string
	State    PowerState
	Template bool
	Tags     []string
	// Lock is the hypervisor's lock on the VM ("clone", "migrate", ...), empty when unlocked.
	Lock      string
	Cores     int
	MemoryMiB int
	// Owner is nil for foreign VMs.
	Owner *Ownership
	// Uptime is how long the VM has been running; zero when stopped.
	Uptime time.Duration
	// Usage is filled by OwnedVMs from the same listing; VM leaves it zero.
	Usage Usage
}

// Owned reports whether HyperFleet created the VM.
func (v VM) Owned() bool { return v.Owner != nil }

// Address is a network address reported by the guest.
type Address struct {
	Type    AddressType
	Address string
}

// AddressType mirrors Cluster API's machine address types.
type AddressType string

const (
	AddressInternalIP  AddressType = "InternalIP"
	AddressExternalIP  AddressType = "ExternalIP"
	AddressHostname    AddressType = "Hostname"
	AddressInternalDNS AddressType = "InternalDNS"
)

// Node is a hypervisor host with its capacity, used for placement.
type Node struct {
	Name        string
	Online      bool
	CPUs        int
	MemoryTotal uint64
	MemoryFree  uint64
}

// TemplateSelector picks the source template of a clone: by ID, or by name and/or tags.
type TemplateSelector struct {
	// ID is the template VM's provider ID (see VMRef.ID); empty selects by Name and Tags.
	ID   string
	Name string
	// Tags must all be present on the template.
	Tags []string
	// Node restricts the search to one node; empty searches the whole cluster.
	Node string
}

func (s TemplateSelector) String() string {
	if s.ID != "" {
		return fmt.Sprintf("id %s", s.ID)
	}
	return fmt.Sprintf("name %q tags %v", s.Name, s.Tags)
}

// Template is a resolved source template.
type Template struct {
	Ref       VMRef
	Name      string
	Tags      []string
	Cores     int
	MemoryMiB int
	// DiskGiB is the size of the boot disk in GiB.
	DiskGiB int
	// BootDisk is the provider's name of the boot disk (Proxmox: its slot, "scsi0"), passed back
	// in DiskSpec.Name.
	BootDisk string
	// Digest identifies the version of the template's configuration the provider read, for the
	// job's record: Proxmox's config digest ("sha1:…"), vSphere's config.changeVersion
	// ("changeVersion:…"); empty where the provider gives none (Hyper-V).
	Digest string
}

// CloneSpec describes a new VM cloned from a template.
type CloneSpec struct {
	Source VMRef
	// Target is where the new VM goes: Node always; ID only for a provider with
	// Capabilities.PreallocatedIDs (from NextID), empty otherwise.
	Target VMRef
	// Name is the new VM's name. HyperFleet derives it from the claim, so it is the same on every
	// retry: a provider without PreallocatedIDs uses it with Owner to find a VM it created.
	Name string
	// Full requests a full copy of the template's disks. The default is a linked clone (Proxmox
	// linked clone, Hyper-V differencing disk) when the provider has Capabilities.LinkedClones;
	// a provider without it always copies.
	Full  bool
	Owner Ownership
	// Storage receives a full copy's disks (a VMStorage's storage, with Capabilities.Storages);
	// empty is the provider's default. Linked clones stay on the template's storage.
	Storage string
	// Proxmox holds the parameters only Proxmox VE has; other providers ignore it.
	Proxmox *ProxmoxClone
}

// ProxmoxClone is the Proxmox-only part of a CloneSpec.
type ProxmoxClone struct {
	// Storage is the target storage of a full clone (linked clones stay on the template's storage).
	Storage string
	// Pool is the resource pool the new VM joins.
	Pool string
}

// NetworkSpec is the VM's first network interface.
type NetworkSpec struct {
	// Name is what the interface connects to: a Proxmox bridge ("vmbr0"), a Hyper-V virtual switch.
	Name string
	// VLAN tag, 0 for none.
	VLAN int
	// Model is the Proxmox NIC model ("virtio"); other providers ignore it.
	Model string
}

// ConfigSpec is the hardware, metadata and cloud-init data applied after a clone, in one step so
// the hypervisor sees as few writes as possible.
type ConfigSpec struct {
	Cores     int
	MemoryMiB int
	Network   *NetworkSpec
	// Tags are added to the ownership tags (kept in the notes by a provider without
	// Capabilities.Tags).
	Tags        []string
	Description string
	// Disk, when set, grows a disk; a disk already that large is left alone, and disks never shrink.
	Disk *DiskSpec
	// CloudInit, when set, is the VM's NoCloud data; it replaces any the VM had.
	CloudInit *CloudInitData
	// ExtraDisks are new, empty disks, made once: a disk whose Name the VM already carries is left
	// as it is (never resized or replaced), so applying the same spec twice adds nothing.
	ExtraDisks []ExtraDisk
	// Start, for a provider with Capabilities.StartOnConfigure and no Disk to grow, powers the VM
	// on right after the configuration is written, on the proof of that write, and Configure
	// returns the start's TaskID. With Disk set it is ignored: the VM must not start before the
	// resize ends.
	Start bool
	// NICs, when set, are all the VM's network interfaces in order (the first is Proxmox net0);
	// interfaces of the template beyond them are removed. Network is then ignored.
	NICs []NIC
	// PCIDevices are host devices passed through by the hypervisor's resource mappings (Proxmox
	// hostpciN); the provider refuses them with ErrUnsupported when it has no such mappings.
	PCIDevices []PCIDevice
	// Proven, when set, is called once Configure's own read has proven the VM the caller's and
	// free of its clone's lock, before anything is uploaded or written: the clone is over, and a
	// caller limiting clones per storage gives its slot to the next clone then instead of after
	// the whole configuration. A provider whose clone ends before Clone returns need not call it.
	Proven func()
}

// PCIDevice is a host PCI device passed through to a VM by a cluster resource mapping.
type PCIDevice struct {
	Mapping    string
	PCIe       bool
	PrimaryGPU bool
}

// NIC is one network interface.
type NIC struct {
	// Name is the interface's name in the guest (the claim's). A provider that names its
	// adapters (Hyper-V) gives the adapter this name; Proxmox has no such name and ignores it.
	Name string
	// Bridge is what the NIC attaches to (a Proxmox bridge, a Hyper-V virtual switch); empty is
	// the provider's default, if it has one.
	Bridge string
	// VLAN tag, 0 for none.
	VLAN int
	// Model is the NIC model ("virtio" when empty).
	Model string
	// MAC is the NIC's address, chosen by the caller so cloud-init's network-config can name it
	// before the VM exists.
	MAC string
	// Firewall turns the hypervisor's firewall on for the NIC.
	Firewall bool
	// MTU, 0 for the bridge's.
	MTU int
	// Policy is the security policy and bandwidth cap of the NIC's VirtualNetwork; nil for a
	// NIC on a plain bridge.
	Policy *NICPolicy
}

// ExtraDisk is an empty disk created with a VM.
type ExtraDisk struct {
	// Name identifies the disk on the VM (the disk's serial number); it is how a retried
	// Configure recognises a disk it made before.
	Name    string
	SizeGiB int
	// Storage holds the disk; empty is the storage of the VM's boot disk.
	Storage string
	// Bus is "scsi" (default), "virtio" or "sata".
	Bus string
}

// DiskSpec is the size a VM disk must have at least.
type DiskSpec struct {
	// Name is the provider's name of the disk, as in Template.BootDisk.
	Name    string
	SizeGiB int
}

// CloudInitData is the NoCloud data handed to the VM.
type CloudInitData struct {
	UserData      string
	MetaData      string
	NetworkConfig string
	VendorData    string
}

// TaskID is a handle to an asynchronous hypervisor operation. It is a plain string (a Proxmox UPID) so
// it can be stored in an object's status and resumed after a restart. The empty TaskID means the
// operation is already done: a provider without Capabilities.AsyncTasks always returns it.
type TaskID string

// TaskState is the observed state of an asynchronous operation.
type TaskState struct {
	Done bool
	// Err is set when the task finished unsuccessfully.
	Err error
	// Progress is the share of a running task done, in percent, when the hypervisor reports it
	// (a Hyper-V migration job); nil when it does not.
	Progress *int
}
