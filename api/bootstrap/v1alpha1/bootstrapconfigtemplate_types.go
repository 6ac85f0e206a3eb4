package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// BootstrapConfigTemplateSpec holds the BootstrapConfig a template stamps out.
type BootstrapConfigTemplateSpec struct {
	Template BootstrapConfigTemplateResource `json:"template"`
}

// BootstrapConfigTemplateResource is the BootstrapConfig created from a template.
type BootstrapConfigTemplateResource struct {
	// metadata is applied to created BootstrapConfigs.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	// +optional
	Spec BootstrapConfigSpec `json:"spec,omitempty,omitzero"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=bootstrapconfigtemplates,scope=Namespaced,categories=cluster-api;hyperfleet,shortName=hfbct
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:printcolumn:name="Attestation",type="string",JSONPath=".spec.template.spec.attestation.method"
// +kubebuilder:printcolumn:name="Identity",type="string",JSONPath=".spec.template.spec.attestation.provider"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// BootstrapConfigTemplate is a template for BootstrapConfigs, referenced by RunnerPools.
type BootstrapConfigTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BootstrapConfigTemplateSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// BootstrapConfigTemplateList is a list of BootstrapConfigTemplates.
type BootstrapConfigTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BootstrapConfigTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&BootstrapConfigTemplate{}, &BootstrapConfigTemplateList{})
}
