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

// VMRef identifies a VM on a hypervisor cluster. Proxmox addresses VMs by node and VMID.
type VMRef struct {
	Node string
	ID   int
}

func (r VMRef) String() string { return fmt.Sprintf("%s/%d", r.Node, r.ID) }

// IsZero reports whether the reference points at no VM.
func (r VMRef) IsZero() bool { return r.ID == 0 }

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
	ID   int
	Name string
	// Tags must all be present on the template.
	Tags []string
	// Node restricts the search to one node; empty searches the whole cluster.
	Node string
}

func (s TemplateSelector) String() string {
	if s.ID != 0 {
		return fmt.Sprintf("vmid %d", s.ID)
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
	// BootDisk is the name of the boot disk ("scsi0").
	BootDisk string
}

// CloneSpec describes a new VM cloned from a template.
type CloneSpec struct {
	Source VMRef
	// Target is the node and VMID of the new VM.
	Target VMRef
	Name   string
	// Full requests a full clone; the default is a linked clone, which Proxmox allows only from templates.
	Full bool
	// Storage is the target storage of a full clone (linked clones stay on the template's storage).
	Storage string
	Pool    string
	Owner   Ownership
}

// NetworkSpec is the VM's first network interface.
type NetworkSpec struct {
	Bridge string
	// VLAN tag, 0 for none.
	VLAN  int
	Model string
}

// ConfigSpec is the hardware, metadata and cloud-init data applied after a clone, in one step so
// the hypervisor sees as few writes as possible.
type ConfigSpec struct {
	Cores     int
	MemoryMiB int
	Network   *NetworkSpec
	// Tags are added to the ownership tags.
	Tags        []string
	Description string
	// Disk, when set, grows a disk; a disk already that large is left alone, and disks never shrink.
	Disk *DiskSpec
	// CloudInit, when set, is the VM's NoCloud data; it replaces any the VM had.
	CloudInit *CloudInitData
}

// DiskSpec is the size a VM disk must have at least.
type DiskSpec struct {
	// Name is the disk's slot ("scsi0").
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
// it can be stored in an object's status and resumed after a restart.
type TaskID string

// TaskState is the observed state of an asynchronous operation.
type TaskState struct {
	Done bool
	// Err is set when the task finished unsuccessfully.
	Err error
}
