package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FleetControlPlaneSpec is empty on purpose. The kubeconfig always holds a token of the
// installation's workload-reader ServiceAccount (which may only read Nodes) and always points at the
// API server the manager itself uses: a user who may create a FleetControlPlane can neither choose
// whose token is minted nor where it is sent.
type FleetControlPlaneSpec struct{}

// FleetControlPlaneInitializationStatus is the Cluster API v1beta2 control plane contract.
type FleetControlPlaneInitializationStatus struct {
	// controlPlaneInitialized is true once the kubeconfig Secret exists.
	// +optional
	ControlPlaneInitialized *bool `json:"controlPlaneInitialized,omitempty"`
}

// FleetControlPlaneStatus reports the kubeconfig Secret.
type FleetControlPlaneStatus struct {
	// initialization is the Cluster API contract.
	// +optional
	Initialization *FleetControlPlaneInitializationStatus `json:"initialization,omitempty"`

	// tokenExpirationTime is when the kubeconfig's token expires; it is renewed well before.
	// +optional
	TokenExpirationTime *metav1.Time `json:"tokenExpirationTime,omitempty"`

	// conditions: Available, Paused.
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
// +kubebuilder:resource:path=fleetcontrolplanes,scope=Namespaced,categories=cluster-api;hyperfleet,shortName=fcp
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
// +kubebuilder:printcolumn:name="Initialized",type="boolean",JSONPath=".status.initialization.controlPlaneInitialized"
// +kubebuilder:printcolumn:name="Available",type="string",JSONPath=".status.conditions[?(@.type=='Available')].status"
// +kubebuilder:printcolumn:name="Token expires",type="date",JSONPath=".status.tokenExpirationTime",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// FleetControlPlane is the control plane of a runner fleet: there is none, and this object says so
// to Cluster API in the way its contract understands.
type FleetControlPlane struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FleetControlPlaneSpec   `json:"spec,omitempty"`
	Status FleetControlPlaneStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (c *FleetControlPlane) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the status conditions.
func (c *FleetControlPlane) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// FleetControlPlaneList is a list of FleetControlPlanes.
type FleetControlPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FleetControlPlane `json:"items"`
}

func init() {
	SchemeBuilder.Register(&FleetControlPlane{}, &FleetControlPlaneList{})
}

// Conditions and reasons.
const (
	AvailableCondition          = "Available"
	KubeconfigReadyReason       = "KubeconfigReady"
	ServiceAccountMissingReason = "ServiceAccountNotFound"
	TokenRequestFailedReason    = "TokenRequestFailed"
	// NamespaceNotEnabledReason: HyperFleet may not read or write Secrets in this namespace because
	// no admin has enabled it (docs/install.md, "Enabling a namespace").
	NamespaceNotEnabledReason = "NamespaceNotEnabled"
)
