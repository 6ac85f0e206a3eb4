package controllers

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// machineChangedBeyondStatus passes a Machine's creation and deletion and the updates that change
// more than its status: spec (generation), labels, annotations, owners, finalizers, deletion.
// The MachineClaim and BootstrapConfig controllers read nothing of a Machine's status, and Cluster
// API writes it at each step of every Machine: in a 1,000-runner burst those writes were most of
// the API server's work, and each woke both controllers for that Machine's claim and config.
func machineChangedBeyondStatus() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		before, after := e.ObjectOld, e.ObjectNew
		if before == nil || after == nil {
			return true
		}
		return before.GetGeneration() != after.GetGeneration() ||
			!maps.Equal(before.GetLabels(), after.GetLabels()) ||
			!maps.Equal(before.GetAnnotations(), after.GetAnnotations()) ||
			!slices.Equal(before.GetFinalizers(), after.GetFinalizers()) ||
			!equality.Semantic.DeepEqual(before.GetOwnerReferences(), after.GetOwnerReferences()) ||
			before.GetDeletionTimestamp().IsZero() != after.GetDeletionTimestamp().IsZero()
	}}
}
