package hypervisorcluster_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestIncompleteListingRetiresNothing: the sweep's one VM listing misses a node (its status did
// not reach the cluster), then the node stops answering direct reads too. A runner whose VM runs
// on that node is neither retired nor deleted; once the node is back, a VM that really stopped is.
func TestIncompleteListingRetiresNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t, testTiming{Sweep: 300 * time.Millisecond, OrphanGrace: time.Second})
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim)
	claim := builder.NewMachineClaim("runner-0", ns).WithHypervisorCluster("pve").Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, claim).Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady))
	}, 90*time.Second, 100*time.Millisecond).Should(Succeed())
	vmid, node := vmidOf(claim.Status.VMID), claim.Status.Node

	stillThere := func(why string) {
		g.Consistently(func(g Gomega) {
			got := &infrav1.MachineClaim{}
			g.Expect(env.Client.Get(ctx, keyOf(claim), got)).To(Succeed(), why)
			g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue(), why)
			vm, ok := sim.VM(vmid)
			g.Expect(ok).To(BeTrue(), why)
			g.Expect(vm.Status).To(Equal("running"), why)
		}, 3*time.Second, 100*time.Millisecond).Should(Succeed())
	}
	omit := sim.InjectFault(pvesim.Fault{Endpoint: "GET /cluster/resources", OmitNodes: []string{node}})
	stillThere("a VM missing from the listing but readable is not gone")
	unreachable := sim.InjectFault(pvesim.Fault{Endpoint: "GET /nodes/{node}/qemu/{vmid}/status/current", Status: 595, Message: "No route to host"})
	stillThere("a VM whose node does not answer is not gone")
	sim.RemoveFault(omit)
	sim.RemoveFault(unreachable)

	g.Expect(sim.PowerOff(vmid)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(claim), &infrav1.MachineClaim{}))
	}, 90*time.Second, 100*time.Millisecond).Should(BeTrue(), "a VM that really stopped is still swept")
}

// busyMarkedRunner starts a pool of at most max runners (min 1) whose one runner runs a job while
// the sweep sees its VM stopped, and returns once the sweep has marked its Machine.
func busyMarkedRunner(t *testing.T, max int32) (pool *fleetv1.RunnerPool, name string, runner *fakegithub.RunnerClient,
	job fakegithub.Job) {
	g := NewWithT(t)
	ctx := context.Background()
	gh := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	gh.AddRepository("sweeps/app")
	// Cluster API runs, so the runner's VM is made the way every runner's is: Cluster API links
	// the claim to its Machine and hands it the bootstrap data, the claim controller provisions.
	startCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t, testTiming{Sweep: 300 * time.Millisecond, OrphanGrace: time.Second})
	ns := newNamespace(t)
	pool = githubPool(t, ns, "sweeps", max, sim, gh)
	got := get(g, pool)
	floor := client.MergeFrom(got.DeepCopy())
	got.Spec.MinReplicas = 1
	g.Expect(env.Client.Patch(ctx, got, floor)).To(Succeed())
	g.Eventually(func(g Gomega) {
		ms := poolMachines(g, pool)
		g.Expect(ms).To(HaveLen(1))
		name = ms[0].Name
	}, 90*time.Second, 100*time.Millisecond).Should(Succeed())

	// The runner registered and took a job, as the bootstrap service and the runner would.
	setRunnerConfigTime(t, ns, name, &metav1.Time{Time: time.Now().Add(-10 * time.Minute)})
	jit := registerJITRunner(t, gh, "sweeps", name)
	job = gh.CreateJob("sweeps/app", []string{"self-hosted", "linux"})
	runner, err := fakegithub.NewRunnerClient(jit, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(runner.Online(ctx)).To(Succeed())
	g.Expect(runner.Acquire(ctx)).To(Equal(job.ID))

	// Its VM, once the claim controller has started it, powers off while the job runs.
	claim := &infrav1.MachineClaim{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, claim)).To(Succeed())
		g.Expect(claim.Status.CompletedStep).To(Equal(infrav1.StepStarted), "%+v", claim.Status.Conditions)
	}, 90*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(sim.PowerOff(vmidOf(claim.Status.VMID))).To(Succeed())

	machine := &clusterv1.Machine{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, machine)).To(Succeed())
		g.Expect(machine.Annotations).To(HaveKey(infrav1.VMStoppedAnnotation))
	}, 90*time.Second, 100*time.Millisecond).Should(Succeed(), "the sweep reports the stopped VM to the pool")
	return pool, name, runner, job
}

// TestSweepNeverRemovesABusyRunner: the sweep sees a runner's VM stopped while GitHub says the
// runner is running a job (the sighting may be wrong, or the job's end not reported yet). The
// sweep must not delete the Machine itself: it marks it, and the pool, which asks GitHub first,
// keeps a busy runner. Once the job is over the pool removes it.
func TestSweepNeverRemovesABusyRunner(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool, name, runner, job := busyMarkedRunner(t, 1)
	g.Consistently(func(g Gomega) {
		g.Expect(poolMachines(g, pool)).To(ConsistOf(HaveField("Name", name)))
	}, 5*time.Second, 250*time.Millisecond).Should(Succeed(), "the busy runner's Machine survives the sweeps")

	g.Expect(runner.Complete(ctx, job.ID, "success")).To(Succeed())
	// No webhook tells the pool the job is over: the sweep's next mark makes it ask GitHub again.
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: pool.Namespace, Name: name}, &clusterv1.Machine{}))
	}, 90*time.Second, 100*time.Millisecond).Should(BeTrue(), "once the job is over the pool replaces the runner")
}

// TestHeldRunnerHoldsItsPlace: a pool of at most 2 runners; its one runner runs a job while the
// sweep sees its VM stopped, so the pool keeps it (GitHub says it is busy). That runner still
// occupies one of the pool's places. Raised to a floor of 2, the pool makes exactly one more
// runner, in the one free place, and never a third beside them.
func TestHeldRunnerHoldsItsPlace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pool, name, _, _ := busyMarkedRunner(t, 2)
	got := get(g, pool)
	floor := client.MergeFrom(got.DeepCopy())
	got.Spec.MinReplicas = 2
	g.Expect(env.Client.Patch(ctx, got, floor)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(poolMachines(g, pool)).To(HaveLen(2))
	}, 90*time.Second, 100*time.Millisecond).Should(Succeed(), "the free place is filled beside the held runner")
	g.Consistently(func(g Gomega) {
		ms := poolMachines(g, pool)
		g.Expect(len(ms)).To(BeNumerically("<=", 2), "never more Machines than maxReplicas")
		g.Expect(ms).To(ContainElement(HaveField("Name", name)), "the busy runner is kept")
	}, 5*time.Second, 250*time.Millisecond).Should(Succeed())
}
