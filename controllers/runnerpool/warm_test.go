package runnerpool_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

const (
	cloneEndpoint = "POST /nodes/{node}/qemu/{vmid}/clone"
	startEndpoint = "POST /nodes/{node}/qemu/{vmid}/status/start"
)

// setWarm sets the pool's warm tier (and, when idle >= 0, its idle floor).
func setWarm(t *testing.T, pool *fleetv1.RunnerPool, warm, idle int32, maxAge time.Duration) {
	t.Helper()
	g := NewWithT(t)
	p := controllertest.Get(g, pool.DeepCopy())
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.WarmReplicas = warm
	if idle >= 0 {
		p.Spec.IdleReplicas = idle
	}
	p.Spec.WarmMaxAge = &metav1.Duration{Duration: maxAge}
	g.Expect(controllertest.Env.Client.Patch(context.Background(), p, patch)).To(Succeed())
}

// poolClaims lists the pool's MachineClaims not being deleted.
func poolClaims(g Gomega, pool *fleetv1.RunnerPool) []infrav1.MachineClaim {
	list := &infrav1.MachineClaimList{}
	g.Expect(controllertest.Env.Client.List(context.Background(), list, client.InNamespace(pool.Namespace),
		client.MatchingLabels{fleetv1.RunnerPoolNameLabel: pool.Name})).To(Succeed())
	var out []infrav1.MachineClaim
	for _, c := range list.Items {
		if c.DeletionTimestamp.IsZero() {
			out = append(out, c)
		}
	}
	return out
}

// claimVM finds the claim's VM in the simulator by its name (the claim's): a VMID is reused by
// the next clone once its VM is destroyed.
func claimVM(sim *pvesim.Simulator, c infrav1.MachineClaim) (pvesim.VM, bool) {
	for _, vm := range sim.VMs() {
		if vm.Name == c.Name && strconv.Itoa(vm.VMID) == c.Status.VMID {
			return vm, true
		}
	}
	return pvesim.VM{}, false
}

// TestWarmRunnerStartsForAJob: a pool of max 1 with one warm VM. The warm VM is cloned and
// configured, then left stopped (the sweep, every second, leaves it alone), and its config holds
// no join token: nothing on the stopped VM or in the cluster can be redeemed while it waits. A job
// then starts that VM: the simulator sees one start and no clone beyond the warm VM's own, and the
// token minted at start is valid for the boot only.
func TestWarmRunnerStartsForAJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	controllertest.StartCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	gh := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	controllertest.StartManagerWith(t, func(c *config.Manager) { c.RepairInterval = time.Second })
	ns := controllertest.NewNamespace(t)
	pool := controllertest.GitHubPool(t, ns, "warmjob", 1, sim, gh)
	setWarm(t, pool, 1, -1, time.Hour)

	var warm infrav1.MachineClaim
	g.Eventually(func(g Gomega) {
		g.Expect(controllertest.Get(g, pool).Status.WarmReplicas).To(Equal(int32(1)))
		claims := poolClaims(g, pool)
		g.Expect(claims).To(HaveLen(1))
		warm = claims[0]
		g.Expect(warm.Annotations).To(HaveKeyWithValue(infrav1.WarmAnnotation, infrav1.WarmHeld))
		g.Expect(conditions.GetReason(&warm, infrav1.MachineClaimVMProvisionedCondition)).To(Equal(infrav1.WarmHeldReason))
		vm, ok := claimVM(sim, warm)
		g.Expect(ok).To(BeTrue())
		g.Expect(vm.Status).To(Equal("stopped"))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed(), "the warm VM is cloned, configured and left stopped")
	g.Expect(sim.Requests()[cloneEndpoint]).To(Equal(1))
	g.Expect(sim.Requests()[startEndpoint]).To(Equal(0))

	// An attacker who reads the stopped VM's cloud-init data, or the cluster, finds no token: none
	// was minted, no data Secret exists, and no token hash would let the bootstrap service redeem one.
	g.Consistently(func(g Gomega) {
		bc := controllertest.Get(g, &bootstrapv1.BootstrapConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: warm.Name}})
		g.Expect(bc.Status.JoinToken).To(BeNil())
		g.Expect(bc.Status.TokenExpirationTime).To(BeNil())
		g.Expect(conditions.GetReason(bc, bootstrapv1.DataSecretAvailableCondition)).To(Equal(bootstrapv1.WarmHeldReason))
		err := controllertest.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: warm.Name}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no bootstrap data Secret for a held config")
		vm, ok := claimVM(sim, warm)
		g.Expect(ok).To(BeTrue(), "the sweep leaves the warm VM alone")
		g.Expect(vm.Status).To(Equal("stopped"))
		for _, disk := range vm.Disks {
			if volid, _, found := strings.Cut(disk, ","); found && strings.HasSuffix(volid, ".iso") {
				data, _ := sim.StorageFile(vm.Node, volid)
				g.Expect(string(data)).NotTo(ContainSubstring("hyperfleet-agent"), "no agent configuration on the stopped VM")
			}
		}
		g.Expect(sim.Requests()[startEndpoint]).To(Equal(0))
	}, 3*time.Second, 250*time.Millisecond).Should(Succeed())

	queuedAt := time.Now()
	gh.CreateJob("warmjob/app", []string{"self-hosted", "linux"}, fakegithub.WithoutQueuedWebhook())
	g.Eventually(func(g Gomega) {
		vm, ok := claimVM(sim, warm)
		g.Expect(ok).To(BeTrue())
		g.Expect(vm.Status).To(Equal("running"))
		c := controllertest.Get(g, warm.DeepCopy())
		g.Expect(c.Annotations).To(HaveKeyWithValue(infrav1.WarmAnnotation, infrav1.WarmStarted))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "the job starts the warm VM")
	g.Expect(sim.Requests()[startEndpoint]).To(Equal(1), "one start")
	g.Expect(sim.Requests()[cloneEndpoint]).To(Equal(1), "no clone for the job: the only clone is the warm VM's own")
	g.Expect(poolClaims(g, pool)).To(HaveLen(1))

	bc := controllertest.Get(g, &bootstrapv1.BootstrapConfig{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: warm.Name}})
	g.Expect(bc.Status.JoinToken).NotTo(BeNil(), "the token is minted at start")
	g.Expect(bc.Status.TokenExpirationTime.Time).To(BeTemporally("<=", time.Now().Add(bootstrap.DefaultJoinTokenTTL)),
		"valid for the boot only, not for the time the VM sat stopped")
	g.Expect(bc.Status.TokenExpirationTime.Time).To(BeTemporally(">=", queuedAt.Add(bootstrap.DefaultJoinTokenTTL).Add(-time.Second)),
		"minted after the job arrived, not when the warm VM was cloned")
}

// TestWarmTierSweepAndMaxAge: the sweep leaves a stopped warm VM alone and destroys a finished
// runner (its VM powered off) beside it; the warm VM, not a clone, replaces the finished runner at
// the pool's idle floor, and the tier is refilled. A warm VM past warmMaxAge is destroyed and
// replaced by a new one.
func TestWarmTierSweepAndMaxAge(t *testing.T) {
	g := NewWithT(t)
	controllertest.StartCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	gh := fakegithub.StartForTest(t, fakegithub.Options{TLS: true})
	controllertest.StartManager(t)
	ns := controllertest.NewNamespace(t)
	pool := controllertest.GitHubPool(t, ns, "warmsweep", 2, sim, gh)
	setWarm(t, pool, 1, 1, time.Hour)

	var warm, idle infrav1.MachineClaim
	found := func(g Gomega) {
		warm, idle = infrav1.MachineClaim{}, infrav1.MachineClaim{}
		claims := poolClaims(g, pool)
		g.Expect(claims).To(HaveLen(2))
		for _, c := range claims {
			if infrav1.IsWarmHeld(c.Annotations) {
				warm = c
			} else {
				idle = c
			}
		}
		g.Expect(warm.Name).NotTo(BeEmpty())
		g.Expect(conditions.GetReason(&warm, infrav1.MachineClaimVMProvisionedCondition)).To(Equal(infrav1.WarmHeldReason))
		g.Expect(idle.Status.CompletedStep).To(Equal(infrav1.StepStarted))
		vm, ok := claimVM(sim, idle)
		g.Expect(ok).To(BeTrue())
		g.Expect(vm.Status).To(Equal("running"))
	}
	g.Eventually(found, 60*time.Second, 200*time.Millisecond).Should(Succeed(), "one idle runner running, one warm VM stopped")
	g.Consistently(func(g Gomega) {
		vm, ok := claimVM(sim, warm)
		g.Expect(ok).To(BeTrue(), "sweeps every second leave the warm VM alone")
		g.Expect(vm.Status).To(Equal("stopped"))
	}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
	clones := sim.Requests()[cloneEndpoint]

	// The idle runner's guest powers off: a runner that finished. The sweep retires it, and the
	// warm VM is started in its place.
	id, _ := strconv.Atoi(idle.Status.VMID)
	g.Expect(sim.PowerOff(id)).To(Succeed())
	first := warm
	g.Eventually(func(g Gomega) {
		_, ok := claimVM(sim, idle)
		g.Expect(ok).To(BeFalse(), "the finished runner's VM is destroyed")
		vm, ok := claimVM(sim, first)
		g.Expect(ok).To(BeTrue(), "the warm VM is not destroyed")
		g.Expect(vm.Status).To(Equal("running"), "it replaces the finished runner")
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Eventually(found, 60*time.Second, 200*time.Millisecond).Should(Succeed(), "the tier is refilled")
	g.Expect(idle.Name).To(Equal(first.Name), "the started warm VM is the idle runner now")
	g.Expect(sim.Requests()[cloneEndpoint]).To(Equal(clones+1), "the only clone is the refill")

	// warmMaxAge comes down under the warm VM's age: it is recycled.
	stale := warm
	setWarm(t, pool, 1, 1, 3*time.Second)
	g.Eventually(func(g Gomega) {
		_, ok := claimVM(sim, stale)
		g.Expect(ok).To(BeFalse(), "the stale warm VM is destroyed")
		var fresh []string
		for _, c := range poolClaims(g, pool) {
			if infrav1.IsWarmHeld(c.Annotations) && c.Name != stale.Name {
				fresh = append(fresh, c.Name)
			}
		}
		g.Expect(fresh).NotTo(BeEmpty(), "and replaced by a new warm VM")
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	setWarm(t, pool, 1, 1, time.Hour)
}
