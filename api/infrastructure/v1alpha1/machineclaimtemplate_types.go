package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// MachineClaimTemplateSpec holds the MachineClaim a template stamps out.
type MachineClaimTemplateSpec struct {
	Template MachineClaimTemplateResource `json:"template"`
}

// MachineClaimTemplateResource is the MachineClaim created from a template.
// +kubebuilder:validation:XValidation:rule="!has(self.spec.nics) || self.spec.nics.all(n, !has(n.ipv4) && !has(n.ipv6))",message="template.spec.nics cannot name a static ipv4 or ipv6 address: every MachineClaim made from the template (each runner of a RunnerPool, each Machine of a MachineDeployment) would get the same one; take each VM's address from a Cluster API IPAM pool with ipv4PoolRef or ipv6PoolRef, or leave the NIC on DHCP"
type MachineClaimTemplateResource struct {
	// metadata is applied to created MachineClaims.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	Spec       MachineClaimSpec     `json:"spec"`
}

// MachineClaimTemplateStatus reports whether the template can be satisfied by the hypervisor.
type MachineClaimTemplateStatus struct {
	// conditions: Ready, TemplateResolved (the source VM template exists), CapacityAvailable
	// (some allowed node can hold the requested cores and memory).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// resolvedTemplate is the source template found per HypervisorCluster, as
	// cluster:node/vmid, with the copies on several nodes joined by "+" (cluster:pve1/9000+pve2/9100).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ResolvedTemplate string `json:"resolvedTemplate,omitempty"`

	// observedGeneration is the generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=machineclaimtemplates,scope=Namespaced,categories=cluster-api;hyperfleet,shortName=mclt
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:printcolumn:name="Template",type="string",JSONPath=".status.resolvedTemplate"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// MachineClaimTemplate is a template for MachineClaims, referenced by RunnerPools, MachineSets and
// MachineDeployments.
type MachineClaimTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MachineClaimTemplateSpec   `json:"spec,omitempty"`
	Status MachineClaimTemplateStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (m *MachineClaimTemplate) GetConditions() []metav1.Condition { return m.Status.Conditions }

// SetConditions replaces the status conditions.
func (m *MachineClaimTemplate) SetConditions(conditions []metav1.Condition) {
	m.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// MachineClaimTemplateList is a list of MachineClaimTemplates.
type MachineClaimTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MachineClaimTemplate `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MachineClaimTemplate{}, &MachineClaimTemplateList{})
}
