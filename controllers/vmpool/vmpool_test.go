package vmpool_test

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

func TestMain(m *testing.M) { controllertest.Main(m, "an API server and the manager") }

// vmPoolEnv starts a simulator, a manager and a HypervisorCluster for a pool test.
func vmPoolEnv(t *testing.T) (string, *pvesim.Simulator) {
	t.Helper()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	controllertest.StartManager(t, controllertest.Timing{Sweep: 300 * time.Millisecond, OrphanGrace: time.Second})
	ns := controllertest.NewNamespace(t)
	controllertest.ProxmoxCluster(t, ns, "pve", sim)
	return ns, sim
}

// webPool is a pool of persistent web servers; their VMs power off at once when deleted.
func webPool(ns, name string, replicas int32) *fleetv1.VMPool {
	return &fleetv1.VMPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleetv1.VMPoolSpec{
			Replicas: ptr.To(replicas),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: fleetv1.VMPoolMachineTemplate{
				ObjectMeta: clusterObjectMeta(map[string]string{"app": name}),
				Spec: infrav1.MachineClaimSpec{
					MachineClaimLifecycleSpec: infrav1.MachineClaimLifecycleSpec{
						Lifecycle: infrav1.LifecyclePersistent, RunStrategy: infrav1.RunStrategyAlways,
						TerminationGracePeriodSeconds: ptr.To[int32](0),
					},
					Template:              infrav1.TemplateSource{ID: "9000"},
					HypervisorClusterName: "pve",
					Cores:                 1,
				},
			},
		},
	}
}

// poolSample is the pool's claims at one instant.
type poolSample struct {
	existing, ready, outdated, updated int
}

// samplePool reads the pool's claims (controlled by it) straight from the API server.
func samplePool(g Gomega, pool *fleetv1.VMPool, hash string) poolSample {
	list := &infrav1.MachineClaimList{}
	g.Expect(controllertest.Env.Client.List(context.Background(), list, client.InNamespace(pool.Namespace),
		client.MatchingLabels{fleetv1.VMPoolNameLabel: pool.Name})).To(Succeed())
	var s poolSample
	for i := range list.Items {
		c := &list.Items[i]
		if !metav1.IsControlledBy(c, pool) {
			continue
		}
		s.existing++
		if !c.DeletionTimestamp.IsZero() {
			continue
		}
		if conditions.IsTrue(c, infrav1.ReadyCondition) {
			s.ready++
		}
		if c.Labels[fleetv1.VMPoolTemplateHashLabel] == hash {
			s.updated++
		} else {
			s.outdated++
		}
	}
	return s
}

// watchPool samples the pool every few milliseconds until stop is called, handing each sample and
// the simulator's VM count to check; it returns the number of samples taken.
func watchPool(t *testing.T, pool *fleetv1.VMPool, sim *pvesim.Simulator, hash func() string, check func(poolSample, int) string) (stop func() int) {
	t.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failure string
	samples := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		g := NewGomega(func(message string, _ ...int) { mu.Lock(); failure = message; mu.Unlock() })
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			s := samplePool(g, pool, hash())
			if msg := check(s, len(controllertest.OwnedVMs(sim))); msg != "" {
				mu.Lock()
				if failure == "" {
					failure = msg
				}
				mu.Unlock()
			}
			samples++
		}
	}()
	return func() int {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if failure != "" {
			t.Fatal(failure)
		}
		return samples
	}
}

// waitPoolSettled waits until the pool has replicas available VMs of its current template and
// nothing else.
func waitPoolSettled(t *testing.T, pool *fleetv1.VMPool, replicas int32) *fleetv1.VMPool {
	t.Helper()
	g := NewWithT(t)
	got := &fleetv1.VMPool{}
	g.Eventually(func(g Gomega) {
		g.Expect(controllertest.Env.Client.Get(context.Background(), controllertest.KeyOf(pool), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.AvailableReplicas).To(Equal(replicas))
		g.Expect(got.Status.UpdatedReplicas).To(Equal(replicas))
		g.Expect(got.Status.Replicas).To(Equal(replicas))
		g.Expect(got.Status.VMs).To(HaveLen(int(replicas)), "no VM still being deleted")
		g.Expect(conditions.GetReason(got, fleetv1.ProgressingCondition)).To(Equal(fleetv1.VMPoolCompleteReason))
		g.Expect(conditions.IsTrue(got, fleetv1.ReadyCondition)).To(BeTrue())
	}, 50*time.Second, 100*time.Millisecond).Should(Succeed())
	return got
}

// TestVMPoolRollingUpdateNeverDropsBelowMinAvailable: a pool of 3 with maxSurge 1,
// maxUnavailable 0 and minReadySeconds 1 replaces every VM after a template change, and at no sample taken throughout
// (every 20 ms) are fewer than 3 of its claims Ready or more than 4 claims (or VMs on the
// hypervisor) in existence. The new VMs have the new template's cores, and each VM is reported in
// the pool's status.
func TestVMPoolRollingUpdateNeverDropsBelowMinAvailable(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, sim := vmPoolEnv(t)
	pool := webPool(ns, "web", 3)
	pool.Spec.MinReadySeconds = 1
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())
	settled := waitPoolSettled(t, pool, 3)
	oldHash := settled.Status.TemplateHash
	g.Expect(settled.Status.Selector).To(Equal("app=web"))
	for _, vm := range settled.Status.VMs {
		g.Expect(vm.Name).To(HavePrefix("web-" + oldHash + "-"))
		g.Expect(vm.Phase).To(Equal(infrav1.MachineClaimPhaseRunning))
		g.Expect(vm.Node).NotTo(BeEmpty())
		g.Expect(vm.Addresses).NotTo(BeEmpty())
		g.Expect(vm.Ready && vm.Available && vm.Updated).To(BeTrue())
	}

	var hashMu sync.Mutex
	newHash := ""
	stop := watchPool(t, pool, sim, func() string { hashMu.Lock(); defer hashMu.Unlock(); return newHash }, func(s poolSample, vms int) string {
		switch {
		case s.ready < 3:
			return "fewer than replicas - maxUnavailable = 3 claims Ready during the rolling update"
		case s.existing > 4:
			return "more than replicas + maxSurge = 4 claims exist during the rolling update"
		case vms > 4:
			return "more than replicas + maxSurge = 4 VMs exist on the hypervisor during the rolling update"
		}
		return ""
	})
	started := time.Now()
	updatePool(t, pool, func(p *fleetv1.VMPool) {
		p.Spec.Template.Spec.Cores = 2
	})
	g.Eventually(func() string { return controllertest.Get(g, pool).Status.TemplateHash }, 10*time.Second, 20*time.Millisecond).ShouldNot(Equal(oldHash))
	hashMu.Lock()
	newHash = controllertest.Get(g, pool).Status.TemplateHash
	hashMu.Unlock()
	g.Eventually(func() string { return conditions.GetReason(controllertest.Get(g, pool), fleetv1.ProgressingCondition) }, 10*time.Second, 20*time.Millisecond).
		Should(Equal(fleetv1.VMPoolRollingUpdateReason))
	done := waitPoolSettled(t, pool, 3)
	samples := stop()
	t.Logf("rolling update of 3 VMs took %s, %d samples", time.Since(started).Round(time.Millisecond), samples)
	g.Expect(samples).To(BeNumerically(">", 20))
	for _, vm := range done.Status.VMs {
		g.Expect(vm.Name).To(HavePrefix("web-" + newHash + "-"))
	}
	vms := controllertest.OwnedVMs(sim)
	g.Expect(vms).To(HaveLen(3))
	for _, vm := range vms {
		g.Expect(vm.Config).To(HaveKeyWithValue("cores", "2"), "VM %d is made from the new template", vm.VMID)
	}
}

// TestVMPoolRecreate: a label added to the template is applied to the claims in place, replacing
// no VM; then, on a spec change under Recreate, no claim of the new template exists while any
// outdated claim (or its VM) does, and the pool comes back at its size.
func TestVMPoolRecreate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, sim := vmPoolEnv(t)
	pool := webPool(ns, "db", 2)
	pool.Spec.Strategy = fleetv1.VMPoolStrategy{Type: fleetv1.RecreateVMPoolStrategy}
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())
	before := waitPoolSettled(t, pool, 2)
	oldHash := before.Status.TemplateHash

	// A label added to the template reaches the claims in place: same claims, same hash.
	updatePool(t, pool, func(p *fleetv1.VMPool) {
		p.Spec.Template.ObjectMeta.Labels["tier"] = "data"
	})
	g.Eventually(func(g Gomega) {
		for _, vm := range before.Status.VMs {
			c := &infrav1.MachineClaim{}
			g.Expect(controllertest.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: vm.Name}, c)).To(Succeed())
			g.Expect(c.Labels).To(HaveKeyWithValue("tier", "data"))
		}
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	vmNames := func(vms []fleetv1.VMStatus) []string {
		names := []string{}
		for _, vm := range vms {
			names = append(names, vm.Name)
		}
		return names
	}
	// The same VMs (their addresses and usage may be refreshed meanwhile).
	g.Expect(vmNames(waitPoolSettled(t, pool, 2).Status.VMs)).To(ConsistOf(vmNames(before.Status.VMs)), "no VM was replaced for a label")

	stop := watchPool(t, pool, sim, func() string { return oldHash }, func(s poolSample, _ int) string {
		// Claims counted "updated" here carry the old hash; the others are new.
		if s.updated > 0 && s.outdated > 0 {
			return "a new claim exists beside an outdated one under Recreate"
		}
		if s.existing > 2 {
			return "more claims than replicas under Recreate"
		}
		return ""
	})
	updatePool(t, pool, func(p *fleetv1.VMPool) {
		p.Spec.Template.Spec.MemoryMiB = 1024
	})
	g.Eventually(func() string { return conditions.GetReason(controllertest.Get(g, pool), fleetv1.ProgressingCondition) }, 10*time.Second, 20*time.Millisecond).
		Should(Equal(fleetv1.VMPoolRecreatingReason))
	done := waitPoolSettled(t, pool, 2)
	stop()
	g.Expect(done.Status.TemplateHash).NotTo(Equal(oldHash))
	for _, vm := range controllertest.OwnedVMs(sim) {
		g.Expect(vm.Config).To(HaveKeyWithValue("memory", "1024"))
	}
}

// TestVMPoolScaleSubresource drives the pool as a HorizontalPodAutoscaler does, through /scale:
// the scale object reads back spec and status replicas and the selector, the claims follow each
// change, scale-down removes the newest VMs, and deleting the pool deletes its claims and VMs. A
// claim someone else labelled as the pool's is never counted, scaled down or deleted.
func TestVMPoolScaleSubresource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, sim := vmPoolEnv(t)

	// Another user's claim carrying the pool's label: not the pool's.
	intruder := &infrav1.MachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "not-yours", Namespace: ns, Labels: map[string]string{fleetv1.VMPoolNameLabel: "api", "app": "api"}},
		Spec:       infrav1.MachineClaimSpec{Template: infrav1.TemplateSource{ID: "9000"}},
	}
	g.Expect(controllertest.Env.Client.Create(ctx, intruder)).To(Succeed())

	pool := webPool(ns, "api", 1)
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())
	first := waitPoolSettled(t, pool, 1).Status.VMs[0].Name
	// Creation times have a resolution of one second: let the next VMs be newer.
	time.Sleep(time.Until(controllertest.Get(g, &infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: first}}).CreationTimestamp.Add(1100 * time.Millisecond)))

	scale := &autoscalingv1.Scale{}
	g.Expect(controllertest.Env.Client.SubResource("scale").Get(ctx, pool, scale)).To(Succeed())
	g.Expect(scale.Spec.Replicas).To(Equal(int32(1)))
	g.Expect(scale.Status.Replicas).To(Equal(int32(1)))
	g.Expect(scale.Status.Selector).To(Equal("app=api"))

	scaleVMPool(g, pool, 3)
	settled := waitPoolSettled(t, pool, 3)
	g.Expect(controllertest.OwnedVMs(sim)).To(HaveLen(3))
	g.Eventually(func(g Gomega) {
		s := &autoscalingv1.Scale{}
		g.Expect(controllertest.Env.Client.SubResource("scale").Get(ctx, pool, s)).To(Succeed())
		g.Expect(s.Status.Replicas).To(Equal(int32(3)))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())

	// The pool's gauges follow: its VMs' memory use comes from the sweep's listing (the simulator
	// reports a third of each VM's memory in use).
	g.Eventually(func(g Gomega) {
		g.Expect(testutil.ToFloat64(metrics.VMPoolReplicas.WithLabelValues(ns, "api", "available"))).To(Equal(3.0))
		g.Expect(testutil.ToFloat64(metrics.VMPoolMemoryUtilisation.WithLabelValues(ns, "api"))).To(BeNumerically("~", 1.0/3, 0.01))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())

	// The oldest VM stays when the pool shrinks to one: scale-down takes the newest.
	g.Expect(settled.Status.VMs).To(ContainElement(HaveField("Name", first)))
	scaleVMPool(g, pool, 1)
	down := waitPoolSettled(t, pool, 1)
	g.Expect(down.Status.VMs[0].Name).To(Equal(first))
	g.Eventually(func() int { return len(controllertest.OwnedVMs(sim)) }, 20*time.Second, 100*time.Millisecond).Should(Equal(1))
	g.Expect(controllertest.Get(g, intruder).DeletionTimestamp.IsZero()).To(BeTrue(), "the intruder's claim is not the pool's to scale down")

	g.Expect(controllertest.Env.Client.Delete(ctx, pool)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(controllertest.Env.Client.Get(ctx, controllertest.KeyOf(pool), &fleetv1.VMPool{}))
	}, 30*time.Second, 100*time.Millisecond).Should(BeTrue(), "the pool goes once its claims are gone")
	g.Expect(controllertest.OwnedVMs(sim)).To(BeEmpty(), "deleting the pool destroys its VMs")
	g.Expect(metrics.VMPoolReplicas.DeletePartialMatch(prometheus.Labels{"namespace": ns, "pool": "api"})).To(BeZero(), "a deleted pool's series are removed")
	g.Expect(controllertest.Get(g, intruder).DeletionTimestamp.IsZero()).To(BeTrue(), "the intruder's claim is not the pool's to delete")
}

// scaleVMPool sets the pool's replicas through /scale as the HorizontalPodAutoscaler does: it reads
// the scale object and writes it back with the resourceVersion it read, reading again when the
// pool changed in between (the controller writes the pool's status all the time).
func scaleVMPool(g Gomega, pool *fleetv1.VMPool, replicas int32) {
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		scale := &autoscalingv1.Scale{}
		if err := controllertest.Env.Client.SubResource("scale").Get(context.Background(), pool, scale); err != nil {
			return err
		}
		scale.Spec.Replicas = replicas
		return controllertest.Env.Client.SubResource("scale").Update(context.Background(), pool, client.WithSubResourceBody(scale))
	})).To(Succeed())
}

// TestVMPoolSelectorMustMatchTemplate: a selector that does not select the template's labels
// leaves the pool Ready=False with reason SelectorMismatch and creates nothing.
func TestVMPoolSelectorMustMatchTemplate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := vmPoolEnv(t)
	pool := webPool(ns, "odd", 1)
	pool.Spec.Selector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"other"}}}}
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())
	g.Eventually(func() string { return conditions.GetReason(controllertest.Get(g, pool), fleetv1.ReadyCondition) }, 10*time.Second, 50*time.Millisecond).
		Should(Equal(fleetv1.VMPoolSelectorMismatchReason))
	g.Consistently(func() int { return samplePool(g, pool, "").existing }, time.Second, 100*time.Millisecond).Should(BeZero())
}

func clusterObjectMeta(labels map[string]string) clusterv1.ObjectMeta {
	return clusterv1.ObjectMeta{Labels: labels}
}

// TestVMPoolAutoscaling: spec.autoscaling sizes the pool from its VMs' memory use as the sweep
// reads it from the hypervisor's listing (the simulator reports a third of each running VM's
// memory in use): above a 20% target the pool grows to maxReplicas, step by step; with the target
// raised to 90% and no scale-down window it shrinks back to minReplicas, the newest VMs first.
func TestVMPoolAutoscaling(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, sim := vmPoolEnv(t)
	pool := webPool(ns, "auto", 1)
	pool.Spec.Autoscaling = &fleetv1.VMPoolAutoscaling{MinReplicas: ptr.To[int32](1), MaxReplicas: 3,
		TargetMemoryUtilizationPercent: ptr.To[int32](20),
		Behavior:                       &fleetv1.VMPoolScalingBehavior{ScaleDown: &fleetv1.VMPoolScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}}}
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, pool)
		g.Expect(got.Spec.Replicas).To(Equal(ptr.To[int32](3)))
		g.Expect(got.Status.Autoscaling).NotTo(BeNil())
		g.Expect(got.Status.Autoscaling.CurrentMemoryUtilizationPercent).To(Equal(ptr.To[int32](33)))
		g.Expect(got.Status.Autoscaling.LastScaleTime).NotTo(BeNil())
	}, 50*time.Second, 100*time.Millisecond).Should(Succeed())
	first := waitPoolSettled(t, pool, 3)
	g.Expect(controllertest.OwnedVMs(sim)).To(HaveLen(3))

	updatePool(t, pool, func(p *fleetv1.VMPool) {
		p.Spec.Autoscaling.TargetMemoryUtilizationPercent = ptr.To[int32](90)
	})
	g.Eventually(func() *int32 { return controllertest.Get(g, pool).Spec.Replicas }, 30*time.Second, 100*time.Millisecond).Should(Equal(ptr.To[int32](1)))
	settled := waitPoolSettled(t, pool, 1)
	g.Expect(first.Status.VMs).To(ContainElement(HaveField("Name", settled.Status.VMs[0].Name)))
	g.Eventually(func() int { return len(controllertest.OwnedVMs(sim)) }, 20*time.Second, 100*time.Millisecond).Should(Equal(1))
}

// updatePool changes the pool, retrying on conflicts with the controller's writes.
func updatePool(t *testing.T, pool *fleetv1.VMPool, mutate func(*fleetv1.VMPool)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		p := &fleetv1.VMPool{}
		if err := controllertest.Env.Client.Get(context.Background(), controllertest.KeyOf(pool), p); err != nil {
			return err
		}
		mutate(p)
		return controllertest.Env.Client.Update(context.Background(), p)
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
}

// TestVMPoolProgressDeadline: a rolling update whose new VM can never be made (its template does
// not exist) makes no progress; after spec.progressDeadlineSeconds the pool's Progressing turns
// False with reason ProgressDeadlineExceeded and a Warning Event, while the outdated VM keeps
// serving. Fixing the template lets the rollout finish and Progressing says Complete.
func TestVMPoolProgressDeadline(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, _ := vmPoolEnv(t)
	pool := webPool(ns, "web", 1)
	pool.Spec.ProgressDeadlineSeconds = ptr.To[int32](3)
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())
	waitPoolSettled(t, pool, 1)

	edit := func(mutate func(*fleetv1.VMPool)) {
		g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := &fleetv1.VMPool{}
			if err := controllertest.Env.Client.Get(ctx, controllertest.KeyOf(pool), got); err != nil {
				return err
			}
			mutate(got)
			return controllertest.Env.Client.Update(ctx, got)
		})).To(Succeed())
	}
	edit(func(p *fleetv1.VMPool) { p.Spec.Template.Spec.Template = infrav1.TemplateSource{ID: "9999"} })
	asked := time.Now()
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, pool)
		g.Expect(conditions.GetReason(got, fleetv1.ProgressingCondition)).To(Equal(fleetv1.VMPoolProgressDeadlineExceededReason))
		g.Expect(conditions.IsFalse(got, fleetv1.ProgressingCondition)).To(BeTrue())
		g.Expect(conditions.GetMessage(got, fleetv1.ProgressingCondition)).To(HavePrefix("no progress for 3s: "))
		g.Expect(conditions.IsTrue(got, fleetv1.ReadyCondition)).To(BeTrue(), "the outdated VM still serves")
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	// Not before the deadline, counted from lastProgressTime, which the API keeps to the second.
	g.Expect(time.Since(asked)).To(BeNumerically(">=", 2*time.Second), "not before the deadline")
	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(controllertest.Env.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		var reasons []string
		for _, e := range events.Items {
			if e.InvolvedObject.Kind == "VMPool" && e.Type == corev1.EventTypeWarning {
				reasons = append(reasons, e.Reason)
			}
		}
		g.Expect(reasons).To(ContainElement(fleetv1.VMPoolProgressDeadlineExceededReason))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())

	edit(func(p *fleetv1.VMPool) {
		p.Spec.Template.Spec.Template = infrav1.TemplateSource{ID: "9000"}
		p.Spec.Template.Spec.Cores = 2
	})
	waitPoolSettled(t, pool, 1)
}
