package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// VMPoolAutoscaling sizes a VMPool from its VMs' resource use with the HorizontalPodAutoscaler's
// algorithm: desired = ceil(replicas × current / target) for each metric, the largest wins, within
// a 10% tolerance, then the behaviour's stabilisation windows and step policies, then
// [minReplicas, maxReplicas].
// +kubebuilder:validation:XValidation:rule="has(self.targetCPUUtilizationPercent) || has(self.targetMemoryUtilizationPercent)",message="autoscaling needs a target: targetCPUUtilizationPercent, targetMemoryUtilizationPercent or both"
type VMPoolAutoscaling struct {
	// minReplicas is the fewest VMs the autoscaler keeps. Default 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// maxReplicas is the most VMs the autoscaler asks for.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxReplicas int32 `json:"maxReplicas"`

	// targetCPUUtilizationPercent is the average CPU use of the pool's running VMs, in percent of
	// the cores they were given, the autoscaler aims at.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	TargetCPUUtilizationPercent *int32 `json:"targetCPUUtilizationPercent,omitempty"`

	// targetMemoryUtilizationPercent is the average memory use, in percent of the memory given.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	TargetMemoryUtilizationPercent *int32 `json:"targetMemoryUtilizationPercent,omitempty"`

	// behavior of scaling up and down, as autoscaling/v2's; unset parts take the HPA's defaults.
	// +optional
	Behavior *VMPoolScalingBehavior `json:"behavior,omitempty"`
}

// VMPoolScalingBehavior is autoscaling/v2's HorizontalPodAutoscalerBehavior.
type VMPoolScalingBehavior struct {
	// scaleUp: default no stabilisation window; at most 4 VMs or 100% more per 15 seconds, whichever is more.
	// +optional
	ScaleUp *VMPoolScalingRules `json:"scaleUp,omitempty"`
	// scaleDown: default a 300-second stabilisation window; up to 100% fewer per 15 seconds.
	// +optional
	ScaleDown *VMPoolScalingRules `json:"scaleDown,omitempty"`
}

// ScalingPolicySelect picks among step policies.
// +kubebuilder:validation:Enum=Max;Min;Disabled
type ScalingPolicySelect string

const (
	// MaxChangePolicySelect allows the largest change any policy allows.
	MaxChangePolicySelect ScalingPolicySelect = "Max"
	// MinChangePolicySelect allows the smallest change any policy allows.
	MinChangePolicySelect ScalingPolicySelect = "Min"
	// DisabledPolicySelect turns scaling in this direction off.
	DisabledPolicySelect ScalingPolicySelect = "Disabled"
)

// VMPoolScalingRules is autoscaling/v2's HPAScalingRules.
type VMPoolScalingRules struct {
	// stabilizationWindowSeconds: scaling up takes the lowest, scaling down the highest
	// recommendation of this many past seconds, so a short spike or dip does not resize the pool.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	StabilizationWindowSeconds *int32 `json:"stabilizationWindowSeconds,omitempty"`

	// selectPolicy: Max (default), Min or Disabled.
	// +optional
	SelectPolicy *ScalingPolicySelect `json:"selectPolicy,omitempty"`

	// policies bound the change per period; unset takes the direction's defaults.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	Policies []VMPoolScalingPolicy `json:"policies,omitempty"`
}

// ScalingPolicyType is what a step policy counts.
// +kubebuilder:validation:Enum=Pods;Percent
type ScalingPolicyType string

const (
	// PodsScalingPolicy allows a number of VMs per period (named Pods as in autoscaling/v2).
	PodsScalingPolicy ScalingPolicyType = "Pods"
	// PercentScalingPolicy allows a percentage of the VMs at the start of the period.
	PercentScalingPolicy ScalingPolicyType = "Percent"
)

// VMPoolScalingPolicy is autoscaling/v2's HPAScalingPolicy.
type VMPoolScalingPolicy struct {
	// type is Pods (a number of VMs) or Percent.
	Type ScalingPolicyType `json:"type"`
	// value: VMs, or percent of the VMs at the start of the period.
	// +kubebuilder:validation:Minimum=1
	Value int32 `json:"value"`
	// periodSeconds the change is counted over.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1800
	PeriodSeconds int32 `json:"periodSeconds"`
}

// VMPoolAutoscalingStatus is the autoscaler's last look at the pool, and the history its
// stabilisation windows and policies need (kept here so a restarted manager keeps it).
type VMPoolAutoscalingStatus struct {
	// currentCPUUtilizationPercent is the average CPU use of the pool's running VMs.
	// +optional
	CurrentCPUUtilizationPercent *int32 `json:"currentCPUUtilizationPercent,omitempty"`
	// currentMemoryUtilizationPercent is the average memory use of the pool's running VMs.
	// +optional
	CurrentMemoryUtilizationPercent *int32 `json:"currentMemoryUtilizationPercent,omitempty"`
	// desiredReplicas is what the autoscaler last decided.
	// +optional
	DesiredReplicas int32 `json:"desiredReplicas"`
	// lastScaleTime is when the autoscaler last changed spec.replicas.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`
	// recommendations within the longest stabilisation window, oldest first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=500
	Recommendations []VMPoolScaleRecord `json:"recommendations,omitempty"`
	// scaleEvents within the longest policy period, oldest first: replicas is the change made.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=500
	ScaleEvents []VMPoolScaleRecord `json:"scaleEvents,omitempty"`
}

// VMPoolScaleRecord is a number of replicas at a time.
type VMPoolScaleRecord struct {
	// time of the record.
	Time metav1.Time `json:"time"`
	// replicas recommended, or the change made (negative when scaling down).
	Replicas int32 `json:"replicas"`
}
