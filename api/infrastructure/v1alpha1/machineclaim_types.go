package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// MachineClaimFinalizer keeps a MachineClaim until its VM is confirmed gone.
const MachineClaimFinalizer = "machineclaim.infrastructure.cluster.x-k8s.io"

// VMStoppedAnnotation is set by the sweep on the Machine of a claim whose VM stopped by itself or is
// gone, with the time it was seen. The sweep never deletes such a Machine itself: it also sets
// Cluster API's remediate-machine annotation, and the Machine's owner (a RunnerPool, which asks
// the CI platform first and keeps a runner that is running a job) replaces it.
const VMStoppedAnnotation = "infrastructure.cluster.x-k8s.io/vm-stopped"

// ProviderIDPrefix starts every providerID HyperFleet sets. No kubelet ever registers a Node with it,
// which keeps Cluster API from waiting for one.
const ProviderIDPrefix = "hyperfleet://"

// MachineClaimPhase is a one-word summary of a MachineClaim's lifecycle.
// +kubebuilder:validation:Enum=Pending;Provisioning;Ready;Running;Stopped;Migrating;Deleting;Failed
type MachineClaimPhase string

const (
	// MachineClaimPhasePending: waiting for the Cluster, the HypervisorCluster or bootstrap data.
	MachineClaimPhasePending MachineClaimPhase = "Pending"
	// MachineClaimPhaseProvisioning: cloning, configuring or booting the VM.
	MachineClaimPhaseProvisioning MachineClaimPhase = "Provisioning"
	// MachineClaimPhaseReady: the VM runs and has bootstrapped.
	MachineClaimPhaseReady MachineClaimPhase = "Ready"
	// MachineClaimPhaseDeleting: the VM is being stopped and destroyed.
	MachineClaimPhaseDeleting MachineClaimPhase = "Deleting"
	// MachineClaimPhaseFailed: provisioning failed in a way retrying will not fix; see conditions.
	MachineClaimPhaseFailed MachineClaimPhase = "Failed"
	// MachineClaimPhaseRunning: a persistent claim's VM is provisioned and runs.
	MachineClaimPhaseRunning MachineClaimPhase = "Running"
	// MachineClaimPhaseStopped: a persistent claim's VM is provisioned and powered off.
	MachineClaimPhaseStopped MachineClaimPhase = "Stopped"
	// MachineClaimPhaseMigrating: a persistent claim's VM is moving to another host.
	MachineClaimPhaseMigrating MachineClaimPhase = "Migrating"
)

// TemplateSource selects the VM template to clone: by ID, or by name and/or tags. A name/tags
// selector may match one copy of the template per node (clusters with local storage keep one on
// every node so linked clones can be made on each); the claim then chooses a node and records the
// copy it clones in status.sourceTemplate. Two matches on one node are ambiguous.
// +kubebuilder:validation:XValidation:rule="has(self.id) != (has(self.name) || has(self.tags))",message="select the template either by id or by name/tags, not both and not neither"
type TemplateSource struct {
	// id of the template VM as its provider writes it: the VMID for Proxmox ("9000"), the VM's
	// GUID for Hyper-V.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9-]*$`
	ID string `json:"id,omitempty"`

	// name of the template.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Name string `json:"name,omitempty"`

	// tags the template must all carry (Proxmox tags; on Hyper-V the tags in the template's notes).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9_][a-z0-9_\-+.]*$`
	Tags []string `json:"tags,omitempty"`

	// node holds the template; empty searches every node. It pins a linked clone to that node.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Node string `json:"node,omitempty"`
}

// NetworkSpec is the VM's network interface.
type NetworkSpec struct {
	// name of what the NIC attaches to: a Proxmox bridge (default vmbr0) or a Hyper-V virtual
	// switch (default the template's).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_. \-]*$`
	Name string `json:"name,omitempty"`

	// vlan tag of the NIC; unset for an untagged port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4094
	VLAN *int32 `json:"vlan,omitempty"`
}

// ProxmoxMachineParameters are a MachineClaim's Proxmox VE specific settings.
type ProxmoxMachineParameters struct {
	// storage receives the disks of a Full clone.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-zA-Z][a-zA-Z0-9\-_.]*$`
	Storage string `json:"storage,omitempty"`

	// networkModel is the model of the first NIC. Default virtio.
	// +optional
	// +kubebuilder:validation:Enum=virtio;e1000;e1000e;rtl8139;vmxnet3
	NetworkModel string `json:"networkModel,omitempty"`

	// pciDevices are host PCI devices passed through to the VM by cluster resource mappings
	// (hostpci0, hostpci1, ...). A VM with them cannot live-migrate. They are set with the VM
	// and cannot change afterwards.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.filter(d, has(d.primaryGPU) && d.primaryGPU).size() <= 1",message="at most one PCI device can be the primary GPU"
	PCIDevices []PCIDevice `json:"pciDevices,omitempty"`
}

// CloudInitSpec is cloud-init data merged with the bootstrap data.
type CloudInitSpec struct {
	// userData is #cloud-config YAML merged under the bootstrap data: the bootstrap data wins on
	// conflicting keys, lists such as runcmd and write_files are concatenated.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	UserData string `json:"userData,omitempty"`
}

// BootstrapSpec supplies bootstrap data to a MachineClaim that has no owner Machine.
type BootstrapSpec struct {
	// dataSecretName names a Secret in this namespace with the bootstrap data in key value.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	DataSecretName *string `json:"dataSecretName,omitempty"`
}

// MachineClaimSpec describes one VM.
// +kubebuilder:validation:XValidation:rule="!has(self.proxmox) || !has(self.proxmox.storage) || (has(self.cloneMode) && self.cloneMode == 'Full')",message="proxmox.storage can only be chosen for a Full clone: linked clones stay on the template's storage"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.claimID) || (has(self.claimID) && self.claimID == oldSelf.claimID)",message="claimID cannot be changed or removed once set: the claim's VM carries it"
// +kubebuilder:validation:XValidation:rule="!has(self.runStrategy) || (has(self.lifecycle) && self.lifecycle == 'Persistent')",message="runStrategy applies only to a Persistent claim: set lifecycle: Persistent, or remove runStrategy"
// +kubebuilder:validation:XValidation:rule="!has(self.lifecycle) || self.lifecycle != 'Persistent' || has(self.runStrategy)",message="a Persistent claim needs a runStrategy: Always, RerunOnFailure, Halted, Manual or Once"
// +kubebuilder:validation:XValidation:rule="!has(self.hooks) || (has(self.lifecycle) && self.lifecycle == 'Persistent')",message="hooks apply only to a Persistent claim: an Ephemeral runner's VM is destroyed, not stopped"
// +kubebuilder:validation:XValidation:rule="!has(self.migrationPolicy) || (has(self.lifecycle) && self.lifecycle == 'Persistent')",message="migrationPolicy applies only to a Persistent claim: an Ephemeral runner is drained, not migrated"
// +kubebuilder:validation:XValidation:rule="(has(self.lifecycle) ? self.lifecycle : 'Ephemeral') == (has(oldSelf.lifecycle) ? oldSelf.lifecycle : 'Ephemeral')",message="lifecycle cannot change: create a new claim instead"
// +kubebuilder:validation:XValidation:rule="!has(self.placement) || (has(self.lifecycle) && self.lifecycle == 'Persistent')",message="placement applies only to a Persistent claim: an Ephemeral runner goes to the host with the most free memory (use failureDomain to pin it)"
// +kubebuilder:validation:XValidation:rule="has(self.nics) == has(oldSelf.nics) && (!has(self.nics) || self.nics == oldSelf.nics)",message="nics cannot change once the claim exists: they are created with the VM; create a new claim instead"
// +kubebuilder:validation:XValidation:rule="!has(self.nics) || !has(self.network)",message="set either network (the first NIC only) or nics, not both"
// +kubebuilder:validation:XValidation:rule="!has(self.dns) || has(self.nics)",message="dns is given with nics: set spec.nics"
// +kubebuilder:validation:XValidation:rule="(has(self.proxmox) && has(self.proxmox.pciDevices)) == (has(oldSelf.proxmox) && has(oldSelf.proxmox.pciDevices)) && (!has(self.proxmox) || !has(self.proxmox.pciDevices) || self.proxmox.pciDevices == oldSelf.proxmox.pciDevices)",message="proxmox.pciDevices cannot change once the claim exists: create a new claim instead"
// +kubebuilder:validation:XValidation:rule="!has(self.storage) || (has(self.cloneMode) && self.cloneMode == 'Full') || has(self.disks)",message="storage places a Full clone's disks and the extra disks: a linked clone stays on its template's storage; set cloneMode: Full or add disks"
// +kubebuilder:validation:XValidation:rule="!has(self.storage) || !has(self.proxmox) || !has(self.proxmox.storage)",message="set either storage (a VMStorage) or proxmox.storage, not both"
// +kubebuilder:validation:XValidation:rule="has(self.storage) == has(oldSelf.storage) && (!has(self.storage) || self.storage == oldSelf.storage)",message="storage cannot change once the claim exists: the VM's disks are made there; create a new claim instead"
type MachineClaimSpec struct {
	// Lifecycle fields (lifecycle, runStrategy, hooks, terminationGracePeriodSeconds, migrationPolicy, placement).
	MachineClaimLifecycleSpec `json:",inline"`

	// Hardware besides the template's (disks, nics, dns); see machineclaim_hardware_types.go.
	MachineClaimHardwareSpec `json:",inline"`

	// claimID identifies this claim on its VM. HyperFleet generates it at random before the VM
	// is created and stamps it, with the claim's namespace and name, on the VM; unlike the
	// object's UID it survives clusterctl move, so a moved claim keeps its VM. It cannot change
	// once set.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]{8,32}$`
	ClaimID string `json:"claimID,omitempty"`

	// providerID is set by HyperFleet once the VM exists: hyperfleet://<hypervisor-cluster-uid>/<vm-id>,
	// the VM ID as in status.vmID (a Proxmox VMID, a Hyper-V VM GUID).
	// No kubelet registers a Node with this scheme, so Cluster API never waits for one.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="providerID cannot be changed once set"
	ProviderID string `json:"providerID,omitempty"`

	// template is the source VM template.
	Template TemplateSource `json:"template"`

	// cloneMode is Linked (default) or Full.
	// +optional
	// +kubebuilder:default=Linked
	CloneMode CloneMode `json:"cloneMode,omitempty"`

	// cores of the VM; default the template's.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=512
	Cores int32 `json:"cores,omitempty"`

	// memoryMiB of the VM; default the template's.
	// +optional
	// +kubebuilder:validation:Minimum=256
	// +kubebuilder:validation:Maximum=4194304
	MemoryMiB int32 `json:"memoryMiB,omitempty"`

	// diskSizeGiB grows the boot disk; it can never shrink below the template's.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	DiskSizeGiB int32 `json:"diskSizeGiB,omitempty"`

	// network configures the first NIC; default the template's.
	// +optional
	Network *NetworkSpec `json:"network,omitempty"`

	// storage places the VM's disks (a Full clone's, and extra disks that name no storage) on
	// a VMStorage, named or by tier; the node chosen must have room for them on it.
	// +optional
	Storage *VMStorageRequest `json:"storage,omitempty"`

	// tags are added to HyperFleet's ownership tags (Proxmox tags; kept in the VM's notes on Hyper-V).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9_][a-z0-9_\-+.]*$`
	Tags []string `json:"tags,omitempty"`

	// cloudInit is merged with the bootstrap data.
	// +optional
	CloudInit *CloudInitSpec `json:"cloudInit,omitempty"`

	// proxmox holds settings that only apply to Proxmox VE. A claim whose HypervisorCluster has
	// another provider is refused with the VMProvisioned reason ProviderMismatch.
	// +optional
	Proxmox *ProxmoxMachineParameters `json:"proxmox,omitempty"`

	// hypervisorClusterName names the HypervisorCluster for a claim without an owner Machine.
	// With an owner Machine, the Cluster's infrastructureRef decides.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	HypervisorClusterName string `json:"hypervisorClusterName,omitempty"`

	// failureDomain (a node) for a claim without an owner Machine; the Machine's failureDomain wins.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`

	// bootstrap supplies bootstrap data to a claim without an owner Machine.
	// +optional
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`
}

// ProvisioningStep is the last provisioning step a MachineClaim completed.
// +kubebuilder:validation:Enum=Cloned;Configured;Started
type ProvisioningStep string

const (
	// StepCloned: the VM exists with HyperFleet's ownership metadata.
	StepCloned ProvisioningStep = "Cloned"
	// StepConfigured: hardware, network and tags are applied.
	StepConfigured ProvisioningStep = "Configured"
	// StepStarted: cloud-init data is attached and the VM was powered on; or, for a persistent VM
	// its run strategy keeps off when made (lastStopCause NeverStarted), handed to that strategy.
	StepStarted ProvisioningStep = "Started"
)

// TaskRef is the in-flight hypervisor task of a claim. While it is set no other task starts, and a
// restarted controller resumes polling it.
type TaskRef struct {
	// id is the hypervisor's task handle (a Proxmox UPID). A provider whose operations are
	// synchronous (Hyper-V) never has one.
	// +kubebuilder:validation:MaxLength=512
	ID string `json:"id"`
	// node runs the task.
	// +kubebuilder:validation:MaxLength=63
	Node string `json:"node"`
	// operation is what the task does: Clone, Configure, Start, Stop or Delete.
	// +kubebuilder:validation:MaxLength=32
	Operation string `json:"operation"`
	// startTime is when the task was started.
	StartTime metav1.Time `json:"startTime"`
}

// Operations a claim records in status.task.operation.
const (
	TaskClone     = "Clone"
	TaskConfigure = "Configure"
	TaskStart     = "Start"
	TaskStop      = "Stop"
	TaskDelete    = "Delete"
)

// PlacedStorage is the VMStorage a claim's disks were placed on.
type PlacedStorage struct {
	// name and namespace of the VMStorage.
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// storageName is the storage's name on the hypervisor.
	StorageName string `json:"storageName"`
	// bytes of the VM's disks placed there.
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
}

// TemplateRef is one template on one node.
type TemplateRef struct {
	// node holds the template.
	// +kubebuilder:validation:MaxLength=63
	Node string `json:"node"`
	// id of the template VM (see TemplateSource.id).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id"`
}

// MachineClaimInitializationStatus is the Cluster API v1beta2 initialization contract.
type MachineClaimInitializationStatus struct {
	// provisioned is true once the VM runs and has an address.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// MachineClaimStatus is what HyperFleet observed about the VM.
type MachineClaimStatus struct {
	// Lifecycle status of persistent claims (resources, last stop, power requests, hooks).
	MachineClaimLifecycleStatus `json:",inline"`

	// initialization is the Cluster API provisioning contract.
	// +optional
	Initialization *MachineClaimInitializationStatus `json:"initialization,omitempty"`

	// conditions: Ready (summary, mirrored to the Machine), VMProvisioned, BootstrapReady, Paused;
	// for persistent claims also LiveMigratable.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// phase summarises the lifecycle.
	// +optional
	Phase MachineClaimPhase `json:"phase,omitempty"`

	// addresses reported by the guest.
	// +optional
	Addresses clusterv1.MachineAddresses `json:"addresses,omitempty"`

	// node is the host running the VM.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Node string `json:"node,omitempty"`

	// vmID is the VM's ID on its hypervisor: a Proxmox VMID in decimal, a Hyper-V VM GUID. A
	// Proxmox VMID is recorded before the clone starts, so a restart finds the VM it started; a
	// Hyper-V ID exists only once the VM does, and a restart that lost it finds the VM again by
	// its ownership marks (spec.claimID) and name.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	VMID string `json:"vmID,omitempty"`

	// sourceTemplate is the template the VM is cloned from, chosen with the node and recorded
	// before the clone starts. When spec.template matches a copy on several nodes, every later
	// step and a restarted controller use this copy, never another node's.
	// +optional
	SourceTemplate *TemplateRef `json:"sourceTemplate,omitempty"`

	// storage is the VMStorage spec.storage placed the VM's disks on, chosen with the node and
	// recorded before the clone starts.
	// +optional
	Storage *PlacedStorage `json:"storage,omitempty"`

	// powerState of the VM as last observed.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	PowerState string `json:"powerState,omitempty"`

	// completedStep is the last provisioning step done; the next reconcile continues after it.
	// +optional
	CompletedStep ProvisioningStep `json:"completedStep,omitempty"`

	// task is the in-flight hypervisor task.
	// +optional
	Task *TaskRef `json:"task,omitempty"`

	// failureCount counts consecutive failed attempts; it drives exponential backoff.
	// +optional
	FailureCount int32 `json:"failureCount,omitempty"`

	// lastFailureTime is when the last attempt failed. No new attempt starts before the backoff
	// after it has passed, whatever wakes the controller, and a restart keeps the backoff.
	// +optional
	LastFailureTime *metav1.Time `json:"lastFailureTime,omitempty"`

	// cloneStartedTime is when the hypervisor accepted the VM's latest clone: the claim's wait for
	// a clone slot or capacity is over, and a runner's bootstrap timeout counts from here.
	// +optional
	CloneStartedTime *metav1.Time `json:"cloneStartedTime,omitempty"`

	// cloudInitEjectedTime is when the VM's cloud-init seed was ejected and deleted, once the join
	// token it holds was redeemed or expired.
	// +optional
	CloudInitEjectedTime *metav1.Time `json:"cloudInitEjectedTime,omitempty"`

	// bootstrappedTime is when the VM's agent proved its identity and fetched its configuration.
	// +optional
	BootstrappedTime *metav1.Time `json:"bootstrappedTime,omitempty"`

	// observedGeneration is the generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// Rules comparing a claim with its previous version (oldSelf) over hardware belong here, on
// MachineClaim, not on MachineClaimSpec: the spec is also the template of MachineClaimTemplates and
// VMPools, whose templates may change (a VMPool rolls its VMs to the new template).

// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="has(self.spec.disks) == has(oldSelf.spec.disks) && (!has(self.spec.disks) || self.spec.disks == oldSelf.spec.disks)",message="disks cannot change once the claim exists: they are created with the VM and never resized, removed or added later; create a new claim instead"
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=machineclaims,scope=Namespaced,categories=cluster-api;hyperfleet,shortName=mcl
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
// +kubebuilder:printcolumn:name="Machine",type="string",JSONPath=".metadata.ownerReferences[?(@.kind=='Machine')].name"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Node",type="string",JSONPath=".status.node"
// +kubebuilder:printcolumn:name="VM ID",type="string",JSONPath=".status.vmID"
// +kubebuilder:printcolumn:name="Power",type="string",JSONPath=".status.powerState"
// +kubebuilder:printcolumn:name="Address",type="string",JSONPath=".status.addresses[0].address"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="ProviderID",type="string",JSONPath=".spec.providerID",priority=1
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// MachineClaim is one VM, cloned from a template: the Cluster API infrastructure machine of a runner.
type MachineClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MachineClaimSpec   `json:"spec,omitempty"`
	Status MachineClaimStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (m *MachineClaim) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the status conditions.
func (m *MachineClaim) SetConditions(conditions []metav1.Condition) { m.Status.Conditions = conditions }

// +kubebuilder:object:root=true

// MachineClaimList is a list of MachineClaims.
type MachineClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineClaim `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MachineClaim{}, &MachineClaimList{})
}

// HypervisorClusterNameLabel is set on each MachineClaim to the HypervisorCluster its VM lives on,
// so the power-state sweep finds a cluster's claims with one indexed list.
const HypervisorClusterNameLabel = "infrastructure.cluster.x-k8s.io/hypervisor-cluster"
