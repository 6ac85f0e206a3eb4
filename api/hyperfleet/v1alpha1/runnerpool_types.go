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

// RunnerMachineTemplate is what each runner is built from.
type RunnerMachineTemplate struct {
	// metadata is applied to the pool's Machines.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// infrastructureRef references a MachineClaimTemplate.
	InfrastructureRef clusterv1.ContractVersionedObjectReference `json:"infrastructureRef"`

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
type RunnerPoolSpec struct {
	// clusterName is the Cluster API Cluster the runners' Machines belong to.
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

	// idleTTL replaces a runner that has waited this long without a job. Default 30m; 0 disables.
	// +optional
	IdleTTL *metav1.Duration `json:"idleTTL,omitempty"`

	// maxLifetime replaces any runner older than this, busy or not. Default 24h; 0 disables.
	// +optional
	MaxLifetime *metav1.Duration `json:"maxLifetime,omitempty"`

	// bootstrapTimeout removes a runner whose VM has not registered with its CI platform within it. Default 10m.
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

	// platformRetryTime, while the CI platform rate-limits the pool (PlatformRateLimited), is when
	// the limit lifts: the pool sends nothing to the platform before it.
	// +optional
	PlatformRetryTime *metav1.Time `json:"platformRetryTime,omitempty"`

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
