package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PlacementSpec is where a persistent claim's VM may run. Every rule is required (hard): a host
// that breaks one is never chosen, neither for the new VM nor when the VM moves (a MachineMigration
// or a host's maintenance); when no host satisfies them all the VM waits (or stays where it is) and
// the reason says which host was left out and why.
type PlacementSpec struct {
	// hostSelector must match the labels the HypervisorCluster declares for the host
	// (spec.hosts[].labels). A host not listed there has no labels.
	// +optional
	HostSelector *metav1.LabelSelector `json:"hostSelector,omitempty"`

	// affinity: for each selector, the host must already run another persistent VM of this
	// namespace and HypervisorCluster whose claim's labels it matches (e.g. a cache next to its
	// database).
	// +optional
	// +kubebuilder:validation:MaxItems=8
	Affinity []metav1.LabelSelector `json:"affinity,omitempty"`

	// antiAffinity: for each selector, the host must run no other persistent VM of this namespace
	// and HypervisorCluster whose claim's labels it matches (e.g. database replicas on different
	// hosts).
	// +optional
	// +kubebuilder:validation:MaxItems=8
	AntiAffinity []metav1.LabelSelector `json:"antiAffinity,omitempty"`
}

// Reasons of a persistent claim's placement, on its VMProvisioned condition.
const (
	// NoHostFitsReason: no host satisfies the persistent claim's placement (host selector,
	// affinity, anti-affinity, free memory, maintenance); the message names each host left out
	// and why. The claim is placed as soon as a host or another claim changes so that one fits.
	NoHostFitsReason = "NoHostFits"
	// InvalidPlacementReason: a selector of spec.placement does not parse.
	InvalidPlacementReason = "InvalidPlacement"
)
