package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// VMPoolFinalizer keeps a VMPool until its MachineClaims (and so their VMs) are gone.
const VMPoolFinalizer = "vmpool.hyperfleet.io"

// VMPoolNameLabel is set on every MachineClaim of a VMPool to the pool's name.
const VMPoolNameLabel = "hyperfleet.io/vm-pool"

// VMPoolTemplateHashLabel is set on every MachineClaim of a VMPool to the hash of the pool's
// template it was made from (as MachineDeployment's machine-template-hash): a claim whose hash is
// not the pool's current one is outdated and is replaced by a rolling update.
const VMPoolTemplateHashLabel = "hyperfleet.io/vm-template-hash"

// VMPoolStrategyType is how a VMPool replaces outdated VMs.
// +kubebuilder:validation:Enum=RollingUpdate;Recreate
type VMPoolStrategyType string

const (
	// RollingUpdateVMPoolStrategy replaces VMs a few at a time, within maxSurge and maxUnavailable.
	RollingUpdateVMPoolStrategy VMPoolStrategyType = "RollingUpdate"
	// RecreateVMPoolStrategy deletes every outdated VM, waits until they are gone, then creates the new ones.
	RecreateVMPoolStrategy VMPoolStrategyType = "Recreate"
)

// VMPoolRollingUpdate bounds a rolling update, with MachineDeployment's meaning and defaults.
// +kubebuilder:validation:XValidation:rule="!(has(self.maxSurge) && (type(self.maxSurge) == int ? self.maxSurge == 0 : self.maxSurge.matches('^0+%$')) && (!has(self.maxUnavailable) || (type(self.maxUnavailable) == int ? self.maxUnavailable == 0 : self.maxUnavailable.matches('^0+%$'))))",message="maxSurge and maxUnavailable cannot both be 0 (maxUnavailable defaults to 0): the update could never replace a VM"
type VMPoolRollingUpdate struct {
	// maxSurge is how many VMs may exist above replicas during the update: a number or a
	// percentage of replicas (rounded up). Default 1.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="maxSurge is a number of VMs (0 or more) or a percentage such as 25%"
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// maxUnavailable is how many VMs below replicas may be unavailable during the update: a number
	// or a percentage of replicas (rounded down). Default 0.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^[0-9]+%$')",message="maxUnavailable is a number of VMs (0 or more) or a percentage such as 25%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// VMPoolStrategy is how a template change reaches the pool's VMs.
// +kubebuilder:validation:XValidation:rule="!has(self.rollingUpdate) || self.type == 'RollingUpdate'",message="rollingUpdate applies only to type RollingUpdate"
type VMPoolStrategy struct {
	// type is RollingUpdate (the default) or Recreate.
	// +optional
	// +kubebuilder:default=RollingUpdate
	Type VMPoolStrategyType `json:"type,omitempty"`

	// rollingUpdate bounds a RollingUpdate.
	// +optional
	RollingUpdate *VMPoolRollingUpdate `json:"rollingUpdate,omitempty"`
}

// VMPoolMachineTemplate is what each of the pool's MachineClaims is made from.
// +kubebuilder:validation:XValidation:rule="has(self.spec.lifecycle) && self.spec.lifecycle == 'Persistent'",message="a VMPool's VMs are long-lived: set template.spec.lifecycle: Persistent (and a runStrategy)"
// +kubebuilder:validation:XValidation:rule="has(self.spec.hypervisorClusterName) && size(self.spec.hypervisorClusterName) > 0",message="template.spec.hypervisorClusterName is required: a pool's claims have no Cluster API Machine to say where their VMs go"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.claimID) && !has(self.spec.providerID)",message="template.spec cannot set claimID or providerID: HyperFleet gives each claim its own"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.nics) || self.spec.nics.all(n, !has(n.ipv4) && !has(n.ipv6))",message="template.spec.nics cannot name a static ipv4 or ipv6 address: every VM of the pool would get the same one; take each VM's address from a Cluster API IPAM pool with ipv4PoolRef or ipv6PoolRef, or leave the NIC on DHCP"
type VMPoolMachineTemplate struct {
	// metadata is applied to the pool's MachineClaims. Its labels must match spec.selector.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`

	// spec of each MachineClaim.
	Spec infrav1.MachineClaimSpec `json:"spec"`
}

// VMPoolSpec is the desired pool.
// +kubebuilder:validation:XValidation:rule="!has(self.progressDeadlineSeconds) || !has(self.minReadySeconds) || self.progressDeadlineSeconds > self.minReadySeconds",message="progressDeadlineSeconds must be greater than minReadySeconds: a new VM counts as progress only once it has been ready that long"
// +kubebuilder:validation:XValidation:rule="!has(self.autoscaling) || !has(self.autoscaling.minReplicas) || self.autoscaling.minReplicas <= self.autoscaling.maxReplicas",message="autoscaling.minReplicas must not be greater than maxReplicas"
type VMPoolSpec struct {
	// replicas is how many VMs the pool keeps. The scale subresource sets it (kubectl scale, a
	// HorizontalPodAutoscaler, KEDA); so does spec.autoscaling when set. Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Replicas *int32 `json:"replicas,omitempty"`

	// selector selects the pool's MachineClaims; it must match template.metadata.labels.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="selector is immutable"
	Selector metav1.LabelSelector `json:"selector"`

	// template is each MachineClaim's metadata and spec. A change to template.spec replaces the
	// VMs as spec.strategy says; a change to template.metadata is applied to the claims in place.
	Template VMPoolMachineTemplate `json:"template"`

	// strategy replaces outdated VMs: RollingUpdate (default maxSurge 1, maxUnavailable 0) or Recreate.
	// +optional
	// +kubebuilder:default={type: RollingUpdate}
	Strategy VMPoolStrategy `json:"strategy,omitempty"`

	// minReadySeconds is how long a VM must have been Ready before it counts as available.
	// Default 0.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// progressDeadlineSeconds is how long a rollout or scaling may go without progress (a VM of
	// the current template made or available, an outdated or surplus VM gone) before Progressing
	// turns False with reason ProgressDeadlineExceeded, as a Deployment's does. The pool keeps
	// trying; the condition is for alerts and for `kubectl wait`. Default 600; it must exceed
	// minReadySeconds.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	ProgressDeadlineSeconds *int32 `json:"progressDeadlineSeconds,omitempty"`

	// autoscaling sizes the pool from its VMs' CPU or memory use, with HorizontalPodAutoscaler's
	// algorithm and behaviour, for clusters without an HPA or KEDA. It writes spec.replicas: do not
	// point an HPA or a KEDA ScaledObject at a pool that sets it.
	// +optional
	Autoscaling *VMPoolAutoscaling `json:"autoscaling,omitempty"`
}

// VMStatus is one of the pool's VMs.
type VMStatus struct {
	// name of the MachineClaim.
	Name string `json:"name"`
	// phase of the claim.
	// +optional
	Phase infrav1.MachineClaimPhase `json:"phase,omitempty"`
	// node (hypervisor host) the VM runs on.
	// +optional
	Node string `json:"node,omitempty"`
	// ready is the claim's Ready condition.
	Ready bool `json:"ready"`
	// available: ready for at least minReadySeconds.
	Available bool `json:"available"`
	// updated: made from the pool's current template.
	Updated bool `json:"updated"`
	// deleting: the claim is being deleted.
	// +optional
	Deleting bool `json:"deleting,omitempty"`
	// addresses reported by the guest.
	// +optional
	Addresses clusterv1.MachineAddresses `json:"addresses,omitempty"`
}

// VMPoolStatus reports the pool's VMs.
type VMPoolStatus struct {
	// replicas is the number of the pool's MachineClaims that exist and are not being deleted.
	// +optional
	Replicas int32 `json:"replicas"`
	// readyReplicas are VMs whose claim is Ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// availableReplicas are VMs Ready for at least minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`
	// updatedReplicas are VMs made from the current template.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas"`
	// unavailableReplicas is spec.replicas less availableReplicas (never below 0).
	// +optional
	UnavailableReplicas int32 `json:"unavailableReplicas"`
	// selector is spec.selector as a label selector string, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`
	// templateHash is the hash of the current template, as on updated claims' VMPoolTemplateHashLabel.
	// +optional
	TemplateHash string `json:"templateHash,omitempty"`
	// lastProgressTime is when the pool's rollout or scaling last moved forward; with
	// spec.progressDeadlineSeconds it decides ProgressDeadlineExceeded.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`
	// vms lists each VM of the pool.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=2000
	VMs []VMStatus `json:"vms,omitempty"`
	// autoscaling reports spec.autoscaling's last decision.
	// +optional
	Autoscaling *VMPoolAutoscalingStatus `json:"autoscaling,omitempty"`
	// conditions: Ready (every wanted VM available) and Progressing (a rollout or scaling under way).
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
// +kubebuilder:resource:path=vmpools,scope=Namespaced,categories=hyperfleet,shortName=vmp
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 46",message="a VMPool's name is at most 46 characters: its VMs are named <pool>-<template hash>-<5 characters>"
// +kubebuilder:printcolumn:name="Desired",type="integer",JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Replicas",type="integer",JSONPath=".status.replicas"
// +kubebuilder:printcolumn:name="Ready",type="integer",JSONPath=".status.readyReplicas"
// +kubebuilder:printcolumn:name="Updated",type="integer",JSONPath=".status.updatedReplicas"
// +kubebuilder:printcolumn:name="Available",type="integer",JSONPath=".status.availableReplicas"
// +kubebuilder:printcolumn:name="Strategy",type="string",JSONPath=".spec.strategy.type"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Progressing')].reason",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// VMPool keeps a number of long-lived VMs (persistent MachineClaims) made from one template, like a
// MachineDeployment: it replaces outdated VMs with a rolling update or Recreate, and scales through
// its /scale subresource (kubectl scale, HorizontalPodAutoscaler, KEDA) or spec.autoscaling.
type VMPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VMPoolSpec   `json:"spec,omitempty"`
	Status VMPoolStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (p *VMPool) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions replaces the status conditions.
func (p *VMPool) SetConditions(conditions []metav1.Condition) { p.Status.Conditions = conditions }

// +kubebuilder:object:root=true

// VMPoolList is a list of VMPools.
type VMPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VMPool `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VMPool{}, &VMPoolList{})
}

// VMPool conditions' reasons. The conditions are ReadyCondition and ProgressingCondition.
const (
	// VMPoolAvailableReason (Ready True): spec.replicas VMs are available.
	VMPoolAvailableReason = "Available"
	// VMPoolUnavailableReason (Ready False): fewer than spec.replicas VMs are available.
	VMPoolUnavailableReason = "VMsUnavailable"
	// VMPoolRollingUpdateReason (Progressing True): outdated VMs are being replaced one batch at a time.
	VMPoolRollingUpdateReason = "RollingUpdate"
	// VMPoolRecreatingReason (Progressing True): outdated VMs are being deleted before new ones are made.
	VMPoolRecreatingReason = "Recreating"
	// VMPoolScalingUpReason (Progressing True): VMs are being added.
	VMPoolScalingUpReason = "ScalingUp"
	// VMPoolScalingDownReason (Progressing True): VMs are being removed.
	VMPoolScalingDownReason = "ScalingDown"
	// VMPoolWaitingForVMsReason (Progressing True): new VMs exist and are not yet available.
	VMPoolWaitingForVMsReason = "WaitingForVMs"
	// VMPoolProgressDeadlineExceededReason (Progressing False): the rollout or scaling made no
	// progress for spec.progressDeadlineSeconds; the pool keeps trying.
	VMPoolProgressDeadlineExceededReason = "ProgressDeadlineExceeded"
	// VMPoolCompleteReason (Progressing False): every VM is made from the current template and the
	// pool has its size.
	VMPoolCompleteReason = "Complete"
	// VMPoolSelectorMismatchReason (Ready False): spec.selector does not match template.metadata.labels.
	VMPoolSelectorMismatchReason = "SelectorMismatch"
	// VMPoolDeletingReason (Ready False): the pool is deleted and waits for its claims to go.
	VMPoolDeletingReason = "Deleting"
	// VMPoolCreateFailedReason (Ready False): the API server refused a new claim; see the message.
	VMPoolCreateFailedReason = "CreateFailed"
)
