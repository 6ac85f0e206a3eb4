package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// HypervisorClusterTemplateSpec holds the template of HypervisorClusters created from a ClusterClass.
type HypervisorClusterTemplateSpec struct {
	Template HypervisorClusterTemplateResource `json:"template"`
}

// HypervisorClusterTemplateResource is the HypervisorCluster a template stamps out.
type HypervisorClusterTemplateResource struct {
	// metadata is applied to the created HypervisorCluster.
	// +optional
	ObjectMeta clusterv1.ObjectMeta  `json:"metadata,omitempty,omitzero"`
	Spec       HypervisorClusterSpec `json:"spec"`
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:path=hypervisorclustertemplates,scope=Namespaced,categories=cluster-api;hyperfleet,shortName=hvct
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.template.spec.endpoint"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// HypervisorClusterTemplate is a template for HypervisorClusters, used by ClusterClass.
type HypervisorClusterTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HypervisorClusterTemplateSpec `json:"spec,omitempty"`
}

// +kubebuilder:object:root=true

// HypervisorClusterTemplateList is a list of HypervisorClusterTemplates.
type HypervisorClusterTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HypervisorClusterTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&HypervisorClusterTemplate{}, &HypervisorClusterTemplateList{})
}
