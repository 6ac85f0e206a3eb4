package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// RunnerPoolFinalizer lets the pool remove its runners' registrations before it goes away.
const RunnerPoolFinalizer = "runnerpool.hyperfleet.io"

// RunnerPoolNameLabel is set on every Machine, MachineClaim and BootstrapConfig of a pool.
const RunnerPoolNameLabel = "hyperfleet.io/runner-pool"

// LocalObjectReference names an object in the referencing object's namespace.
type LocalObjectReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}

// SecretKeyReference names a key of a Secret in the referencing object's namespace.
type SecretKeyReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// key in the Secret's data.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// RunnerTargetLabel is set on every Machine, MachineClaim and BootstrapConfig of a pool with
// spec.template.targets to the name of the target the runner was placed on.
const RunnerTargetLabel = "hyperfleet.io/runner-target"

// RunnerTarget is one place a pool's runners may go: a Cluster API Cluster whose infrastructure is
// one HypervisorCluster (of any provider), and the MachineClaimTemplate its runners' claims are
// made from.
type RunnerTarget struct {
	// name identifies the target in the pool's status and on its runners (label hyperfleet.io/runner-target).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// clusterName is the Cluster API Cluster the target's Machines belong to; its infrastructureRef
	// names the target's HypervisorCluster.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ClusterName string `json:"clusterName"`

	// infrastructureRef references the MachineClaimTemplate of the target's runners.
	// +kubebuilder:validation:XValidation:rule="self.kind == 'MachineClaimTemplate'",message="a target's infrastructureRef must be a MachineClaimTemplate"
	InfrastructureRef clusterv1.ContractVersionedObjectReference `json:"infrastructureRef"`

	// priority orders the targets: new runners go to the lowest priority that can take them and
	// spill over to the next while it is down, full or failing. Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Priority int32 `json:"priority,omitempty"`

	// weight shares new runners among targets of equal priority in proportion. Default 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=1
	Weight int32 `json:"weight,omitempty"`
}

// RunnerMachineTemplate is what each runner is built from.
// +kubebuilder:validation:XValidation:rule="has(self.infrastructureRef) != has(self.targets)",message="set exactly one of template.infrastructureRef (one HypervisorCluster, through spec.clusterName) or template.targets (several)"
// +kubebuilder:validation:XValidation:rule="!has(self.targets) || !has(self.failureDomain)",message="failureDomain names a node of one HypervisorCluster and cannot be used with targets"
// +kubebuilder:validation:XValidation:rule="!has(self.metadata) || !has(self.metadata.annotations) || self.metadata.annotations.all(k, !k.startsWith('hyperfleet.io/') && !k.startsWith('infrastructure.cluster.x-k8s.io/') && !k.startsWith('bootstrap.cluster.x-k8s.io/'))",message="template.metadata.annotations cannot use HyperFleet's own prefixes (hyperfleet.io/, infrastructure.cluster.x-k8s.io/, bootstrap.cluster.x-k8s.io/): HyperFleet sets those annotations itself on each runner's objects"
type RunnerMachineTemplate struct {
	// metadata's labels and annotations are applied to each runner's Machine, MachineClaim and
	// BootstrapConfig, over those of the MachineClaimTemplate and BootstrapConfigTemplate.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// infrastructureRef references a MachineClaimTemplate; the runners' Machines belong to
	// spec.clusterName. Exactly one of infrastructureRef and targets.
	// +optional
	InfrastructureRef clusterv1.ContractVersionedObjectReference `json:"infrastructureRef,omitempty,omitzero"`

	// targets lets the pool draw from several HypervisorClusters of any provider: each runner's
	// Machine belongs to its target's Cluster. Exactly one of infrastructureRef and targets.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Targets []RunnerTarget `json:"targets,omitempty"`

	// bootstrapConfigRef references a BootstrapConfigTemplate.
	BootstrapConfigRef clusterv1.ContractVersionedObjectReference `json:"bootstrapConfigRef"`

	// failureDomain pins runners to one failure domain (hypervisor node); empty spreads them.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	FailureDomain string `json:"failureDomain,omitempty"`
}

// RunnerPoolSpec describes a pool of one-job runners.
// +kubebuilder:validation:XValidation:rule="self.minReplicas <= self.maxReplicas",message="minReplicas must not be greater than maxReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.idleReplicas) || self.idleReplicas <= self.maxReplicas",message="idleReplicas must not be greater than maxReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || (self.replicas >= self.minReplicas && self.replicas <= self.maxReplicas)",message="replicas must lie between minReplicas and maxReplicas"
// +kubebuilder:validation:XValidation:rule="!has(self.warmReplicas) || self.warmReplicas <= self.maxReplicas",message="warmReplicas must not be greater than maxReplicas: warm VMs count toward it"
// +kubebuilder:validation:XValidation:rule="(has(self.idleReplicas) ? self.idleReplicas : 0) + (has(self.warmReplicas) ? self.warmReplicas : 0) <= self.maxReplicas",message="idleReplicas plus warmReplicas must not be greater than maxReplicas: idle runners and warm VMs both count toward it"
type RunnerPoolSpec struct {
	// clusterName is the pool's Cluster API Cluster: pausing or deleting it pauses or empties the
	// pool, and without template.targets the runners' Machines belong to it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterName is immutable"
	ClusterName string `json:"clusterName"`

	// replicas, when set (by a person, HPA or KEDA through the scale subresource), is the desired
	// number of runners and replaces demand-based scaling. Unset: desired = busy + queued + idleReplicas.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// minReplicas is the floor of runners kept whatever the demand.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=0
	MinReplicas int32 `json:"minReplicas"`

	// maxReplicas is never exceeded; runners being deleted count toward it until they are gone.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	MaxReplicas int32 `json:"maxReplicas"`

	// idleReplicas is how many idle runners are kept ready for the next job.
	// +optional
	// +kubebuilder:validation:Minimum=0
	IdleReplicas int32 `json:"idleReplicas,omitempty"`

	// warmReplicas is how many warm VMs are kept: cloned, configured and stopped, never booted. A
	// job that finds no idle runner starts one (its pickup pays the boot only, not the clone) and
	// the tier is refilled by cloning in the background. Warm VMs count toward maxReplicas; a
	// stopped VM holds its disk, not memory. Their join token is minted when they start.
	// +optional
	// +kubebuilder:validation:Minimum=0
	WarmReplicas int32 `json:"warmReplicas,omitempty"`

	// warmMaxAge recycles a warm VM that was not started within it: it is destroyed and replaced
	// by a fresh clone, so a started VM is never older than this (image updates, template changes).
	// Default 8h; at least 1s, at most 168h.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('168h')",message="warmMaxAge must be at least 1s and at most 168h"
	WarmMaxAge *metav1.Duration `json:"warmMaxAge,omitempty"`

	// idleTTL replaces a runner that has waited this long without a job. Default 30m; 0 disables.
	// +optional
	IdleTTL *metav1.Duration `json:"idleTTL,omitempty"`

	// maxLifetime replaces any runner older than this, busy or not. Default 24h; 0 disables.
	// +optional
	MaxLifetime *metav1.Duration `json:"maxLifetime,omitempty"`

	// bootstrapTimeout removes a runner whose VM has not registered with its CI platform within it
	// of its clone being accepted; time spent waiting in the hypervisor's queue (for a clone slot
	// or for capacity) does not count. Default 10m.
	// +optional
	BootstrapTimeout *metav1.Duration `json:"bootstrapTimeout,omitempty"`

	// platform is the CI platform the runners register with and take jobs from: exactly one of
	// github, gitlab or buildkite.
	Platform PlatformSpec `json:"platform"`

	// template is what each runner's Machine is built from.
	Template RunnerMachineTemplate `json:"template"`
}

// RunnerPoolStatus reports the pool's runners and demand.
type RunnerPoolStatus struct {
	// replicas is the number of runner Machines that exist.
	// +optional
	// +kubebuilder:default=0
	Replicas int32 `json:"replicas"`

	// desiredReplicas is the target the controller is moving to.
	// +optional
	// +kubebuilder:default=0
	DesiredReplicas int32 `json:"desiredReplicas"`

	// readyReplicas are runners whose VM has bootstrapped.
	// +optional
	// +kubebuilder:default=0
	ReadyReplicas int32 `json:"readyReplicas"`

	// idleReplicas are ready runners waiting for a job.
	// +optional
	// +kubebuilder:default=0
	IdleReplicas int32 `json:"idleReplicas"`

	// busyReplicas are runners running a job.
	// +optional
	// +kubebuilder:default=0
	BusyReplicas int32 `json:"busyReplicas"`

	// warmReplicas are warm VMs ready to start: cloned, configured and stopped (those still being
	// cloned are not counted). They are part of replicas.
	// +optional
	WarmReplicas int32 `json:"warmReplicas,omitempty"`

	// platform is the kind of CI platform spec.platform names: github, gitlab or buildkite.
	// +optional
	Platform string `json:"platform,omitempty"`

	// queuedJobs is the number of queued jobs this pool can serve.
	// +optional
	// +kubebuilder:default=0
	QueuedJobs int32 `json:"queuedJobs"`

	// selector is the label selector of the pool's Machines, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`

	// lastRepairTime is when demand was last reconciled against the CI platform's API.
	// +optional
	LastRepairTime *metav1.Time `json:"lastRepairTime,omitempty"`

	// repairResumeTime, when set, is the earliest the next repair runs: the last one stopped to
	// keep the rest of the platform's rate-limit budget for runner registrations
	// (PlatformRateLimited False, reason BudgetReserved) until the budget is renewed.
	// +optional
	RepairResumeTime *metav1.Time `json:"repairResumeTime,omitempty"`

	// platformRetryTime, while the CI platform rate-limits the pool (PlatformRateLimited), is when
	// the limit lifts: the pool sends nothing to the platform before it.
	// +optional
	PlatformRetryTime *metav1.Time `json:"platformRetryTime,omitempty"`

	// targets reports each of spec.template.targets: its runners and whether it takes new ones.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Targets []RunnerTargetStatus `json:"targets,omitempty"`

	// waitingForCapacity counts, per HypervisorCluster, the runners whose VM waits for a host with
	// room (their MachineClaims say NoCapacity). They start as VMs of the cluster are removed.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=16
	WaitingForCapacity []CapacityWait `json:"waitingForCapacity,omitempty"`

	// conditions: Ready, ScalingLimited, PlatformAvailable, PlatformRateLimited, InsecureTransport.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// RunnerTargetStatus is one target's share of the pool.
type RunnerTargetStatus struct {
	// name of the target.
	Name string `json:"name"`
	// replicas is the number of the pool's runner Machines on the target.
	// +kubebuilder:default=0
	Replicas int32 `json:"replicas"`
	// state is Ready (takes new runners), Down, Full or Failing (skipped).
	// +optional
	State string `json:"state,omitempty"`
	// message says why a target is skipped.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:path=runnerpools,scope=Namespaced,categories=hyperfleet,shortName=rp
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".spec.clusterName"
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".status.desiredReplicas"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas"
// +kubebuilder:printcolumn:name="Ready",type="integer",JSONPath=".status.readyReplicas"
// +kubebuilder:printcolumn:name="Idle",type="integer",JSONPath=".status.idleReplicas"
// +kubebuilder:printcolumn:name="Busy",type="integer",JSONPath=".status.busyReplicas"
// +kubebuilder:printcolumn:name="Warm",type="integer",JSONPath=".status.warmReplicas",priority=1
// +kubebuilder:printcolumn:name="Queued",type="integer",JSONPath=".status.queuedJobs"
// +kubebuilder:printcolumn:name="Min",type="integer",JSONPath=".spec.minReplicas"
// +kubebuilder:printcolumn:name="Max",type="integer",JSONPath=".spec.maxReplicas"
// +kubebuilder:printcolumn:name="Platform",type="string",JSONPath=".status.platform",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// RunnerPool keeps a pool of ephemeral one-job CI runners, one Cluster API Machine (and VM) each,
// sized by the queued jobs its labels can serve.
type RunnerPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RunnerPoolSpec   `json:"spec,omitempty"`
	Status RunnerPoolStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (p *RunnerPool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions replaces the status conditions.
func (p *RunnerPool) SetConditions(conditions []metav1.Condition) { p.Status.Conditions = conditions }

// +kubebuilder:object:root=true

// RunnerPoolList is a list of RunnerPools.
type RunnerPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RunnerPool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RunnerPool{}, &RunnerPoolList{})
}
