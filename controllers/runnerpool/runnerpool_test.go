package runnerpool_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

func TestMain(m *testing.M) { controllertest.Main(m, "an API server and the manager") }

func queued(id int64, labels ...string) platform.JobEvent {
	return platform.JobEvent{JobID: strconv.FormatInt(id, 10), RunID: strconv.FormatInt(id, 10), State: platform.JobQueued, Labels: labels, Organization: "acme", Repository: "acme/app"}
}

// TestRunnerPoolScalesWithDemand sizes a pool from its job ledger: the floor, growth to queued
// demand within max, and back to the floor when the jobs are gone. Every Machine comes with its
// MachineClaim and BootstrapConfig, and Cluster API takes them from there.
func TestRunnerPoolScalesWithDemand(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	_, ns, _ := controllertest.StartFleet(t)
	controllertest.RunnerTemplates(t, ns)
	g.Expect(controllertest.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github-app", Namespace: ns},
		StringData: map[string]string{"app-id": "1", "private-key": "not used here"}})).To(Succeed())
	// The templates' and the pool's metadata reach each runner's objects, the pool's over the templates'.
	// Patches, not updates: the template controller writes the template's status meanwhile.
	mct := controllertest.Get(g, &infrav1.MachineClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "runner", Namespace: ns}})
	before := client.MergeFrom(mct.DeepCopy())
	mct.Spec.Template.ObjectMeta = clusterv1.ObjectMeta{Labels: map[string]string{"disk": "ssd"},
		Annotations: map[string]string{"example.com/from": "claim-template", "example.com/owner": "templates"}}
	g.Expect(controllertest.Env.Client.Patch(ctx, mct, before)).To(Succeed())
	bct := controllertest.Get(g, &bootstrapv1.BootstrapConfigTemplate{ObjectMeta: metav1.ObjectMeta{Name: "runner", Namespace: ns}})
	before = client.MergeFrom(bct.DeepCopy())
	bct.Spec.Template.ObjectMeta = clusterv1.ObjectMeta{Annotations: map[string]string{"example.com/from": "config-template"}}
	g.Expect(controllertest.Env.Client.Patch(ctx, bct, before)).To(Succeed())
	pool := builder.NewRunnerPool("linux", ns).WithCluster("fleet").WithBounds(1, 4).WithLabels("linux", "x64").
		WithTemplates("runner", "runner").Build()
	pool.Spec.Template.ObjectMeta = clusterv1.ObjectMeta{Labels: map[string]string{"team": "ci"},
		Annotations: map[string]string{"example.com/owner": "team-ci", "cluster.x-k8s.io/exclude-node-draining": ""}}
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())

	g.Eventually(func(g Gomega) {
		ms := controllertest.PoolMachines(g, pool)
		g.Expect(ms).To(HaveLen(1), "the floor")
		m := ms[0]
		g.Expect(m.Spec.ClusterName).To(Equal("fleet"))
		g.Expect(metav1.IsControlledBy(&m, controllertest.Get(g, pool))).To(BeTrue())
		g.Expect(m.Labels).To(HaveKeyWithValue("team", "ci"))
		g.Expect(m.Annotations).To(HaveKeyWithValue("example.com/owner", "team-ci"))
		g.Expect(m.Annotations).To(HaveKeyWithValue("cluster.x-k8s.io/exclude-node-draining", ""))
		g.Expect(m.Annotations).NotTo(HaveKey("example.com/from"), "a Machine has no template of its own")
		claim := controllertest.Get(g, &infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: ns}})
		g.Expect(claim.Labels).To(HaveKeyWithValue(fleetv1.RunnerPoolNameLabel, "linux"))
		g.Expect(claim.Labels).To(HaveKeyWithValue("team", "ci"))
		g.Expect(claim.Labels).To(HaveKeyWithValue("disk", "ssd"))
		g.Expect(claim.Annotations).To(HaveKeyWithValue("example.com/from", "claim-template"))
		g.Expect(claim.Annotations).To(HaveKeyWithValue("example.com/owner", "team-ci"), "the pool's over the template's")
		config := controllertest.Get(g, &bootstrapv1.BootstrapConfig{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: ns}})
		g.Expect(config.Annotations).To(HaveKeyWithValue("example.com/from", "config-template"))
		g.Expect(config.Labels).To(HaveKeyWithValue("team", "ci"))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	// kubectl get runnerpools shows 0, not a blank, for counts that are zero.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(fleetv1.GroupVersion.WithKind("RunnerPool"))
	g.Expect(controllertest.Env.Client.Get(ctx, controllertest.KeyOf(pool), u)).To(Succeed())
	busy, found, err := unstructured.NestedInt64(u.Object, "status", "busyReplicas")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(busy).To(BeZero())

	store := demand.NewStore(controllertest.Env.Client)
	live := controllertest.Get(g, pool)
	for id := int64(1); id <= 6; id++ {
		_, err := store.Record(ctx, live, queued(id, "linux", "x64"))
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, pool)
		g.Expect(got.Status.QueuedJobs).To(Equal(int32(6)))
		g.Expect(got.Status.DesiredReplicas).To(Equal(int32(4)), "clamped to max")
		g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(4))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(len(controllertest.PoolMachines(g, pool))).To(BeNumerically("<=", 4), "max is never exceeded")
	}, 2*time.Second, 100*time.Millisecond).Should(Succeed())

	for id := int64(1); id <= 6; id++ {
		ev := queued(id, "linux", "x64")
		ev.State = platform.JobCompleted
		_, err := store.Record(ctx, controllertest.Get(g, pool), ev)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Eventually(func(g Gomega) {
		g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(1), "back to the floor")
		g.Expect(controllertest.Get(g, pool).Status.DesiredReplicas).To(Equal(int32(1)))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
}

// TestClusterDeletionRemovesTheFleet deletes a runner fleet's Cluster: Cluster API deletes its
// Machines, the pool does not recreate them, every VM is destroyed and the HypervisorCluster goes last.
func TestClusterDeletionRemovesTheFleet(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim, ns, cluster := controllertest.StartFleet(t)
	controllertest.RunnerTemplates(t, ns)
	pool := builder.NewRunnerPool("linux", ns).WithCluster("fleet").WithBounds(2, 4).WithTemplates("runner", "runner").Build()
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(2))
		g.Expect(controllertest.OwnedVMs(sim)).To(HaveLen(2))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())

	g.Expect(controllertest.Env.Client.Delete(ctx, cluster)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := controllertest.Env.Client.Get(ctx, controllertest.KeyOf(cluster), &clusterv1.Cluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Cluster gone")
		list := &clusterv1.MachineList{}
		g.Expect(controllertest.Env.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
		g.Expect(controllertest.OwnedVMs(sim)).To(BeEmpty(), "every VM destroyed")
		err = controllertest.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pve"}, &infrav1.HypervisorCluster{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "HypervisorCluster released last")
	}, 90*time.Second, 500*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.GetReason(controllertest.Get(g, pool), fleetv1.ReadyCondition)).To(Equal(fleetv1.ClusterNotFoundReason))
	}, 10*time.Second, 200*time.Millisecond).Should(Succeed(), "the pool says why it has no runners")
}

// TestScaleDownRemovesTheRunnersParts scales a pool down before Cluster API has touched its new
// Machines (no Cluster API controllers here): a Machine without Cluster API's finalizer goes at once
// and would leave its MachineClaim and BootstrapConfig behind for ever, so the pool deletes them.
func TestScaleDownRemovesTheRunnersParts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool, ns := twoRunnerPool(t)
	scalePool(g, pool, 0)
	g.Eventually(func(g Gomega) {
		g.Expect(controllertest.PoolMachines(g, pool)).To(BeEmpty())
		claims := &infrav1.MachineClaimList{}
		g.Expect(controllertest.Env.Client.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
		g.Expect(claims.Items).To(BeEmpty(), "no MachineClaim is left behind")
		configs := &bootstrapv1.BootstrapConfigList{}
		g.Expect(controllertest.Env.Client.List(ctx, configs, client.InNamespace(ns))).To(Succeed())
		g.Expect(configs.Items).To(BeEmpty(), "no BootstrapConfig is left behind")
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}

// TestScaleDownWaitsWhileARunnerRegisters scales a pool down while the bootstrap service is issuing
// one runner's config (registering it with GitHub): that runner could take a job the moment it
// registers, so it stays until the issuing ends; the other, which never got a config, goes at once.
func TestScaleDownWaitsWhileARunnerRegisters(t *testing.T) {
	g := NewWithT(t)
	pool, ns := twoRunnerPool(t)
	machines := controllertest.PoolMachines(g, pool)
	registering, idle := machines[0].Name, machines[1].Name
	controllertest.SetRunnerConfigTime(t, ns, registering, ptr.To(metav1.Now()))

	scalePool(g, pool, 0)
	g.Eventually(func(g Gomega) {
		g.Expect(controllertest.PoolMachines(g, pool)).To(ConsistOf(HaveField("Name", registering)))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "%s never got a config and goes", idle)
	g.Consistently(func(g Gomega) {
		g.Expect(controllertest.PoolMachines(g, pool)).To(ConsistOf(HaveField("Name", registering)))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed(), "a runner being registered stays")

	// The registration failed and the service gave the claim back: now the pool can retire it.
	controllertest.SetRunnerConfigTime(t, ns, registering, nil)
	g.Eventually(func(g Gomega) { g.Expect(controllertest.PoolMachines(g, pool)).To(BeEmpty()) }, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}

// twoRunnerPool starts the manager (no Cluster API controllers) on a simulated fleet and creates a
// pool of two replicas, returning once both Machines exist.
func twoRunnerPool(t *testing.T) (*fleetv1.RunnerPool, string) {
	t.Helper()
	g := NewWithT(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	controllertest.StartManager(t)
	ns := controllertest.NewNamespace(t)
	controllertest.CAPIFleet(t, ns, sim)
	controllertest.RunnerTemplates(t, ns)
	pool := builder.NewRunnerPool("linux", ns).WithCluster("fleet").WithBounds(0, 3).WithReplicas(2).
		WithTemplates("runner", "runner").Build()
	g.Expect(controllertest.Env.Client.Create(context.Background(), pool)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(2)) }, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	return pool, ns
}

// scalePool sets the pool's replicas with a merge patch, as kubectl scale would: the controller
// updates the pool's status meanwhile.
func scalePool(g Gomega, pool *fleetv1.RunnerPool, replicas int32) {
	got := controllertest.Get(g, pool)
	scaled := client.MergeFrom(got.DeepCopy())
	got.Spec.Replicas = ptr.To(replicas)
	g.Expect(controllertest.Env.Client.Patch(context.Background(), got, scaled)).To(Succeed())
}

// TestQueuedRunnersAreNotTimedOut: a runner whose claim waits in its hypervisor's queue for a
// clone slot is not replaced by the bootstrap timeout, which counts from its clone. Before, a
// burst larger than the hypervisors could clone within the timeout replaced its own tail again and
// again (517 of a 1,000-runner burst), each replacement joining the back of the queue.
func TestQueuedRunnersAreNotTimedOut(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	controllertest.StartCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	// The first clone holds the only slot for 8 s, far past the pool's bootstrap timeout of 3 s.
	sim.InjectFault(pvesim.Fault{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", Count: 1, TaskDuration: 8 * time.Second})
	controllertest.StartManager(t)
	ns := controllertest.NewNamespace(t)
	controllertest.ProxmoxCluster(t, ns, "pve", sim, func(hc *infrav1.HypervisorCluster) {
		hc.Spec.Limits = infrav1.HypervisorClusterLimits{ClonesPerHost: 1, TasksPerStorage: 1, DeletesPerHost: 4}
	})
	g.Expect(controllertest.Env.Client.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "HypervisorCluster", Name: "pve"}}})).To(Succeed())
	controllertest.RunnerTemplates(t, ns)
	pool := builder.NewRunnerPool("linux", ns).WithCluster("fleet").WithBounds(0, 2).WithReplicas(2).
		WithTemplates("runner", "runner").Build()
	pool.Spec.BootstrapTimeout = &metav1.Duration{Duration: 3 * time.Second}
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())

	var queued string
	g.Eventually(func(g Gomega) {
		claims := &infrav1.MachineClaimList{}
		g.Expect(controllertest.Env.Client.List(ctx, claims, client.InNamespace(ns))).To(Succeed())
		for _, c := range claims.Items {
			if conditions.GetReason(&c, infrav1.MachineClaimVMProvisionedCondition) == infrav1.WaitingForSlotReason {
				queued = c.Name
			}
		}
		g.Expect(queued).NotTo(BeEmpty(), "one runner waits for the clone slot")
	}, 30*time.Second, 50*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		c := &infrav1.MachineClaim{}
		g.Expect(controllertest.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: queued}, c)).To(Succeed())
		if conditions.GetReason(c, infrav1.MachineClaimVMProvisionedCondition) != infrav1.WaitingForSlotReason {
			return // its turn came: from now on its bootstrap timeout runs
		}
		g.Expect(controllertest.PoolMachines(g, pool)).To(ContainElement(HaveField("Name", queued)), "the queued runner is kept")
	}, 5*time.Second, 100*time.Millisecond).Should(Succeed())
}
