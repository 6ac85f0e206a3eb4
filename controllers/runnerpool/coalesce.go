package runnerpool

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// poolChildDelay is how long a RunnerPool's reconcile follows a change to one of its runners'
// objects (Machines, claims, configs, its ledger). Changes within it wake the pool once: in a
// burst a thousand runners change many times a second, and each pool reconcile reads the ledger
// from the API server and writes the pool's status. The pool's own changes and the webhook
// receiver's wake-ups are not delayed.
const poolChildDelay = time.Second

// coalesced is handler.EnqueueRequestsFromMapFunc whose requests wait delay in the work queue,
// where a request already waiting absorbs the same one added again.
func coalesced(delay time.Duration, fn handler.MapFunc) handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	add := func(ctx context.Context, o client.Object, q queue) {
		if o == nil {
			return
		}
		for _, req := range fn(ctx, o) {
			q.AddAfter(req, delay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { add(ctx, e.Object, q) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			add(ctx, e.ObjectOld, q)
			add(ctx, e.ObjectNew, q)
		},
		DeleteFunc:  func(ctx context.Context, e event.DeleteEvent, q queue) { add(ctx, e.Object, q) },
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q queue) { add(ctx, e.Object, q) },
	}
}

// controllingOwner maps an object to its controlling owner of kind gk, as Owns does.
func controllingOwner(gk schema.GroupKind) handler.MapFunc {
	return func(_ context.Context, o client.Object) []ctrl.Request {
		ref := metav1.GetControllerOf(o)
		if ref == nil || ref.Kind != gk.Kind {
			return nil
		}
		if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != gk.Group {
			return nil
		}
		return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: ref.Name}}}
	}
}
