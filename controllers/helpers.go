package controllers

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

func klogRef(o client.Object) klog.ObjectRef { return klog.KObj(o) }

func controllerRemoveFinalizer(o client.Object, finalizer string) {
	controllerutil.RemoveFinalizer(o, finalizer)
}

// conditionObject is an object with []metav1.Condition.
type conditionObject interface {
	client.Object
	conditions.Setter
}

// mirrorCondition copies condition from onto to, so Ready reads like its most telling cause.
func mirrorCondition(obj conditionObject, from, to string) {
	c := conditions.Get(obj, from)
	if c == nil {
		conditions.Set(obj, metav1.Condition{Type: to, Status: metav1.ConditionUnknown, Reason: fleetv1.PendingReason,
			Message: "waiting for the first reconcile"})
		return
	}
	conditions.Set(obj, metav1.Condition{Type: to, Status: c.Status, Reason: c.Reason, Message: c.Message,
		ObservedGeneration: obj.GetGeneration()})
}

// backoff is the delay after n consecutive failures: 5s doubling up to 5m.
func backoff(n int32) time.Duration {
	d := 5 * time.Second
	for i := int32(1); i < n && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}
