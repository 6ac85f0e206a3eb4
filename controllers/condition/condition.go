// Package condition holds the condition helpers several controllers share.
package condition

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

// Object is an object with []metav1.Condition.
type Object interface {
	client.Object
	conditions.Setter
}

// Mirror copies condition from onto to, so Ready reads like its most telling cause. Before from
// exists, to is Unknown with reason Pending.
func Mirror(obj Object, from, to string) {
	c := conditions.Get(obj, from)
	if c == nil {
		conditions.Set(obj, metav1.Condition{Type: to, Status: metav1.ConditionUnknown, Reason: fleetv1.PendingReason,
			Message: "waiting for the first reconcile"})
		return
	}
	conditions.Set(obj, metav1.Condition{Type: to, Status: c.Status, Reason: c.Reason, Message: c.Message,
		ObservedGeneration: obj.GetGeneration()})
}

// Truncate keeps a message within n bytes (the API's limit for the field it goes in), marking the
// cut with "...".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
