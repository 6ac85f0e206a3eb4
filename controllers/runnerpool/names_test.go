package runnerpool_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestRunnerNameTakenByAnotherObject: the name a pool generates for its next runner is already
// used by an object that is not the pool's (another runner's, or planted to be taken over). The
// pool never touches that object — no label, owner, field or spec of it changes — and creates its
// runner under another name.
func TestRunnerNameTakenByAnotherObject(t *testing.T) {
	for _, taken := range []string{"BootstrapConfig", "MachineClaim"} {
		t.Run(taken, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			controllertest.StartCAPI(t)
			sim := pvesim.StartForTest(t, pvesim.Config{})
			var calls atomic.Int32
			controllertest.StartManager(t, controllertest.Timing{Sweep: time.Second, OrphanGrace: 2 * time.Second, RunnerName: func(pool string) string {
				if calls.Add(1) == 1 {
					return pool + "-taken"
				}
				return pool + "-free"
			}})
			ns := controllertest.NewNamespace(t)
			controllertest.CAPIFleet(t, ns, sim)
			controllertest.RunnerTemplates(t, ns)

			owner := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "someone-else", UID: types.UID("4b1d0000-0000-4000-8000-000000000001")}
			var planted client.Object
			if taken == "BootstrapConfig" {
				planted = &bootstrapv1.BootstrapConfig{ObjectMeta: metav1.ObjectMeta{Name: "linux-taken", Namespace: ns,
					Labels: map[string]string{"team": "b"}, OwnerReferences: []metav1.OwnerReference{owner}}}
			} else {
				mc := builder.NewMachineClaim("linux-taken", ns).Build()
				mc.Spec.MemoryMiB = 777 // unlike the pool's template
				mc.Labels, mc.OwnerReferences = map[string]string{"team": "b"}, []metav1.OwnerReference{owner}
				planted = mc
			}
			g.Expect(controllertest.Env.Client.Create(ctx, planted)).To(Succeed())
			before := planted.DeepCopyObject().(client.Object)

			pool := builder.NewRunnerPool("linux", ns).WithCluster("fleet").WithBounds(1, 2).
				WithTemplates("runner", "runner").Build()
			g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())

			g.Eventually(func(g Gomega) {
				ms := controllertest.PoolMachines(g, pool)
				g.Expect(ms).To(HaveLen(1))
				g.Expect(ms[0].Name).To(Equal("linux-free"))
			}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
			g.Consistently(func(g Gomega) {
				now := before.DeepCopyObject().(client.Object)
				g.Expect(controllertest.Env.Client.Get(ctx, client.ObjectKeyFromObject(before), now)).To(Succeed())
				// Its own controller may reconcile it; the pool must not have written to it at all.
				g.Expect(now.GetManagedFields()).NotTo(ContainElement(HaveField("Manager", "runnerpool-controller")), "the pool wrote no field of it")
				g.Expect(now.GetLabels()).To(Equal(before.GetLabels()))
				g.Expect(now.GetOwnerReferences()).To(Equal([]metav1.OwnerReference{owner}))
				switch o := now.(type) {
				case *bootstrapv1.BootstrapConfig:
					g.Expect(o.Spec).To(Equal(before.(*bootstrapv1.BootstrapConfig).Spec))
				case *infrav1.MachineClaim:
					b := before.(*infrav1.MachineClaim).Spec
					g.Expect([]any{o.Spec.Template, o.Spec.Cores, o.Spec.MemoryMiB}).To(Equal([]any{b.Template, b.Cores, b.MemoryMiB}))
				}
			}, 3*time.Second, 200*time.Millisecond).Should(Succeed())
			// Events are posted asynchronously by the manager's recorder.
			g.Eventually(func(g Gomega) {
				events := &corev1.EventList{}
				g.Expect(controllertest.Env.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
				g.Expect(events.Items).To(ContainElement(HaveField("Reason", "RunnerNameTaken")))
			}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		})
	}
}
