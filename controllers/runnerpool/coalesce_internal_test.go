package runnerpool

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

// TestChildEventsWakeTheirPoolOnce: a hundred changes to the runners of one pool within the delay
// become one request for that pool, after the delay; a Machine another kind controls, or none,
// wakes no pool.
func TestChildEventsWakeTheirPoolOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	h := coalesced(200*time.Millisecond, controllingOwner(fleetv1.GroupVersion.WithKind("RunnerPool").GroupKind()))
	yes := true
	machine := func(i int, kind, apiVersion string) *clusterv1.Machine {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ci", Name: fmt.Sprintf("m-%d", i)}}
		if kind != "" {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: "linux", UID: "u", Controller: &yes}}
		}
		return m
	}
	start := time.Now()
	for i := range 100 {
		m := machine(i, "RunnerPool", fleetv1.GroupVersion.String())
		h.Update(ctx, event.UpdateEvent{ObjectOld: m, ObjectNew: m}, q)
	}
	h.Create(ctx, event.CreateEvent{Object: machine(100, "MachineSet", clusterv1.GroupVersion.String())}, q)
	h.Create(ctx, event.CreateEvent{Object: machine(101, "RunnerPool", "example.com/v1")}, q)
	h.Delete(ctx, event.DeleteEvent{Object: machine(102, "", "")}, q)
	g.Expect(q.Len()).To(BeZero(), "nothing before the delay")

	req, _ := q.Get()
	g.Expect(time.Since(start)).To(BeNumerically(">=", 200*time.Millisecond))
	g.Expect(req).To(Equal(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ci", Name: "linux"}}))
	q.Done(req)
	g.Consistently(q.Len, 400*time.Millisecond, 50*time.Millisecond).Should(BeZero(), "one request for a hundred changes")
}
