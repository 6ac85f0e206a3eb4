package machineclaim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// startEndpoint is the simulator's request count key for starting a VM.
const startEndpoint = "POST /nodes/{node}/qemu/{vmid}/status/start"

// personStops stops (or shuts down) the VM from the hypervisor side, through the API as a person
// or another tool would.
func personStops(t *testing.T, sim *pvesim.Simulator, claim *infrav1.MachineClaim, shutdown bool) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	node, err := sim.PersonClient().Node(ctx, claim.Status.Node)
	g.Expect(err).NotTo(HaveOccurred())
	vm, err := node.VirtualMachine(ctx, vmidOf(claim.Status.VMID))
	g.Expect(err).NotTo(HaveOccurred())
	if shutdown {
		_, err = vm.Shutdown(ctx)
	} else {
		_, err = vm.Stop(ctx)
	}
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(vmStatus(sim, claim), 10*time.Second, 10*time.Millisecond).Should(Equal("stopped"))
}

// setRunStrategy changes the claim's run strategy, as a person editing it would.
func setRunStrategy(t *testing.T, claim *infrav1.MachineClaim, strategy infrav1.RunStrategy) {
	t.Helper()
	g := NewWithT(t)
	got := get(g, claim)
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.RunStrategy = strategy
	g.Expect(env.Client.Patch(context.Background(), got, patch)).To(Succeed())
}

func annotatePowerRequest(t *testing.T, claim *infrav1.MachineClaim, action string) {
	t.Helper()
	g := NewWithT(t)
	got := get(g, claim)
	patch := client.MergeFrom(got.DeepCopy())
	if got.Annotations == nil {
		got.Annotations = map[string]string{}
	}
	got.Annotations[infrav1.PowerRequestAnnotation] = action
	g.Expect(env.Client.Patch(context.Background(), got, patch)).To(Succeed())
}

// TestPersistentAlwaysRestarts: under Always a persistent VM that stops, whether the guest shut it
// down or someone stopped it on the hypervisor, is started again and never swept; its status
// carries the resource usage from the sweep's listing.
func TestPersistentAlwaysRestarts(t *testing.T) {
	g := NewWithT(t)
	claim, sim := persistentVM(t, infrav1.RunStrategyAlways)
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning))
		g.Expect(conditions.IsTrue(got, infrav1.ReadyCondition)).To(BeTrue())
		g.Expect(got.Status.Resources).NotTo(BeNil())
		g.Expect(got.Status.Resources.Memory.Allocated.Equal(resource.MustParse("2Gi"))).To(BeTrue(), "%v", got.Status.Resources.Memory.Allocated)
		g.Expect(got.Status.Resources.CPU.Allocated.Value()).To(Equal(int64(2)))
		g.Expect(got.Status.Resources.Memory.Used.IsZero()).To(BeFalse())
		g.Expect(got.Status.Resources.Disk.Allocated.IsZero()).To(BeFalse())
		// The simulator's disks are on local-lvm, which only the VM's node has.
		g.Expect(conditions.GetReason(got, infrav1.MachineClaimLiveMigratableCondition)).To(Equal(infrav1.LocalDisksReason))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	g.Expect(sim.PowerOff(vmidOf(claim.Status.VMID))).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.RestartCount).To(BeNumerically(">=", 1))
		g.Expect(vmStatus(sim, claim)()).To(Equal("running"))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "a guest shutdown is undone")
	// When the sweep saw the VM off (no memory in use) before the controller started it again and
	// recorded it running itself, that reading is replaced within a few sweeps of the restart, not
	// kept until the usage refresh a minute later (when the restart came first, the reading from
	// before the stop stays, and is a running VM's).
	g.Eventually(func(g Gomega) {
		r := get(g, claim).Status.Resources
		g.Expect(r).NotTo(BeNil())
		g.Expect(r.Memory.Used.IsZero()).To(BeFalse(), "the reading of a running VM")
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed(), "usage is read again once the VM runs")

	personStops(t, sim, claim, false)
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.RestartCount).To(BeNumerically(">=", 2))
		g.Expect(vmStatus(sim, claim)()).To(Equal("running"))
		g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "a hypervisor-side stop is undone")
}

// TestPersistentRerunOnFailure: a guest shutdown is respected, a stop from the hypervisor side is
// a failure and is undone.
func TestPersistentRerunOnFailure(t *testing.T) {
	g := NewWithT(t)
	claim, sim := persistentVM(t, infrav1.RunStrategyRerunOnFailure)
	g.Eventually(func() infrav1.MachineClaimPhase { return get(g, claim).Status.Phase }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(infrav1.MachineClaimPhaseRunning))

	g.Expect(sim.PowerOff(vmidOf(claim.Status.VMID))).To(Succeed())
	staysOff(t, sim, claim, "a guest shutdown is respected under RerunOnFailure")
	got := get(g, claim)
	g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseStopped))
	g.Expect(got.Status.LastStopCause).To(Equal(infrav1.StopCauseGuestShutdown))
	g.Expect(conditions.IsFalse(got, infrav1.ReadyCondition)).To(BeTrue())
	g.Expect(conditions.GetReason(got, infrav1.MachineClaimLiveMigratableCondition)).To(Equal(infrav1.NotRunningReason))
	g.Expect(got.Status.RestartCount).To(BeZero())

	// Someone starts it again on the hypervisor, then stops it there: that is a failure.
	ctx := context.Background()
	node, err := sim.PersonClient().Node(ctx, claim.Status.Node)
	g.Expect(err).NotTo(HaveOccurred())
	vm, err := node.VirtualMachine(ctx, vmidOf(claim.Status.VMID))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = vm.Start(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() infrav1.MachineClaimPhase { return get(g, claim).Status.Phase }, 30*time.Second, 100*time.Millisecond).
		Should(Equal(infrav1.MachineClaimPhaseRunning))
	personStops(t, sim, claim, true)
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.RestartCount).To(Equal(int32(1)))
		g.Expect(vmStatus(sim, claim)()).To(Equal("running"))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "a shutdown asked of the hypervisor is a failure")
}

// TestPersistentHaltedOnceManual: Halted keeps the VM off; Once and Manual leave a stopped VM
// off; Manual acts on power requests only, running the preStop hook before a graceful stop, and
// the other strategies refuse requests.
func TestPersistentHaltedOnceManual(t *testing.T) {
	t.Run("Halted", func(t *testing.T) {
		g := NewWithT(t)
		claim, sim := persistentVM(t, infrav1.RunStrategyHalted, func(b *builder.MachineClaimBuilder) { b.WithTerminationGracePeriod(5) })
		g.Eventually(vmStatus(sim, claim), 30*time.Second, 100*time.Millisecond).Should(Equal("stopped"))
		g.Eventually(func(g Gomega) {
			got := get(g, claim)
			g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseStopped))
			g.Expect(got.Status.LastStopCause).To(Equal(infrav1.StopCauseNeverStarted))
			g.Expect(conditions.GetReason(got, infrav1.ReadyCondition)).To(Equal(infrav1.VMStoppedByRunStrategyReason))
			g.Expect(got.Spec.ProviderID).NotTo(BeEmpty(), "a VM made off is provisioned")
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		annotatePowerRequest(t, claim, infrav1.PowerRequestStart)
		g.Eventually(func(g Gomega) {
			got := get(g, claim)
			g.Expect(got.Annotations).NotTo(HaveKey(infrav1.PowerRequestAnnotation))
			g.Expect(got.Status.LastPowerRequest).NotTo(BeNil())
			g.Expect(got.Status.LastPowerRequest.Accepted).To(BeFalse())
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
		staysOff(t, sim, claim, "Halted refuses a start request")
		g.Expect(sim.Requests()[startEndpoint]).To(BeZero(), "as KubeVirt, Halted never starts a new VM")

		// Halted becomes Always (KubeVirt's virtctl start): the VM's first boot, then it runs.
		setRunStrategy(t, claim, infrav1.RunStrategyAlways)
		g.Eventually(vmStatus(sim, claim), 30*time.Second, 100*time.Millisecond).Should(Equal("running"))
		g.Eventually(func(g Gomega) {
			got := get(g, claim)
			g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning))
			g.Expect(conditions.GetReason(got, infrav1.MachineClaimVMProvisionedCondition)).To(Equal(infrav1.VMRunningReason))
			g.Expect(got.Status.Addresses).NotTo(BeEmpty(), "the first boot's addresses are read from the guest agent")
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		// Back to Halted: stopped gracefully, as asked.
		setRunStrategy(t, claim, infrav1.RunStrategyHalted)
		g.Eventually(vmStatus(sim, claim), 30*time.Second, 100*time.Millisecond).Should(Equal("stopped"))
		g.Eventually(func() infrav1.StopCause { return get(g, claim).Status.LastStopCause }, 30*time.Second, 100*time.Millisecond).
			Should(Equal(infrav1.StopCauseRequested))
	})

	t.Run("Once", func(t *testing.T) {
		g := NewWithT(t)
		claim, sim := persistentVM(t, infrav1.RunStrategyOnce)
		g.Eventually(func() infrav1.MachineClaimPhase { return get(g, claim).Status.Phase }, 30*time.Second, 100*time.Millisecond).
			Should(Equal(infrav1.MachineClaimPhaseRunning))
		personStops(t, sim, claim, false)
		staysOff(t, sim, claim, "Once never restarts, even after a hypervisor-side stop")
		g.Expect(get(g, claim).Status.RestartCount).To(BeZero())
	})

	t.Run("Manual", func(t *testing.T) {
		g := NewWithT(t)
		claim, sim := persistentVM(t, infrav1.RunStrategyManual, func(b *builder.MachineClaimBuilder) {
			b.WithHooks([]string{"echo", "warm"}, []string{"echo", "bye"}).WithTerminationGracePeriod(2)
		})
		vmid := vmidOf(claim.Status.VMID)
		staysOff(t, sim, claim, "Manual does not start a new VM by itself")
		g.Expect(sim.Requests()[startEndpoint]).To(BeZero())
		g.Expect(get(g, claim).Status.LastStopCause).To(Equal(infrav1.StopCauseNeverStarted))

		annotatePowerRequest(t, claim, infrav1.PowerRequestStart)
		g.Eventually(vmStatus(sim, claim), 30*time.Second, 100*time.Millisecond).Should(Equal("running"))
		g.Eventually(func(g Gomega) {
			got := get(g, claim)
			g.Expect(got.Annotations).NotTo(HaveKey(infrav1.PowerRequestAnnotation))
			// The annotation goes and the record is written in two requests: wait for both.
			g.Expect(got.Status.LastPowerRequest).NotTo(BeNil())
			g.Expect(got.Status.LastPowerRequest.Accepted).To(BeTrue())
			g.Expect(got.Status.Hook).To(BeNil())
			g.Expect(commands(sim, vmid)).To(ContainElement("echo warm"), "preStart runs once the guest agent answers")
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

		// A guest that powers itself off stays off.
		g.Eventually(func() string { return get(g, claim).Status.PowerState }, 30*time.Second, 100*time.Millisecond).Should(Equal(string(hypervisor.PowerStateRunning)))
		g.Expect(sim.PowerOff(vmid)).To(Succeed())
		staysOff(t, sim, claim, "Manual does not restart by itself")
		annotatePowerRequest(t, claim, infrav1.PowerRequestStart)
		g.Eventually(vmStatus(sim, claim), 30*time.Second, 100*time.Millisecond).Should(Equal("running"))

		// A guest that ignores the shutdown request is powered off after the grace period.
		g.Expect(sim.IgnoreShutdown(vmid, true)).To(Succeed())
		asked := time.Now()
		annotatePowerRequest(t, claim, infrav1.PowerRequestStop)
		g.Eventually(vmStatus(sim, claim), 30*time.Second, 50*time.Millisecond).Should(Equal("stopped"))
		g.Expect(time.Since(asked)).To(BeNumerically(">=", 2*time.Second), "the guest had its grace period")
		g.Expect(commands(sim, vmid)).To(ContainElement("echo bye"), "preStop ran before the stop")
		g.Eventually(func() infrav1.StopCause { return get(g, claim).Status.LastStopCause }, 30*time.Second, 100*time.Millisecond).
			Should(Equal(infrav1.StopCauseRequested))
		staysOff(t, sim, claim, "a requested stop stays")

		// Deleting the claim destroys the VM; a running one gets its preStop hook first.
		annotatePowerRequest(t, claim, infrav1.PowerRequestStart)
		g.Eventually(vmStatus(sim, claim), 30*time.Second, 100*time.Millisecond).Should(Equal("running"))
		g.Expect(sim.IgnoreShutdown(vmid, false)).To(Succeed())
		byes := countOf(commands(sim, vmid), "echo bye")
		g.Eventually(func() bool { return get(g, claim).Status.Hook == nil }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
		g.Expect(env.Client.Delete(context.Background(), claim)).To(Succeed())
		g.Eventually(vmStatus(sim, claim), 30*time.Second, 100*time.Millisecond).Should(Equal("gone"))
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(context.Background(), keyOf(claim), &infrav1.MachineClaim{}))
		}, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
		g.Expect(countOf(commands(sim, vmid), "echo bye")).To(Equal(byes+1), "preStop ran before the deletion stopped the VM")
	})
}

// TestPowerRequestWrittenWhileAnotherIsTaken: a stop written while the controller is starting the
// VM for the start before it is not lost: the start's request is removed only while it holds
// "start", and the stop is taken next. (Removing it with the end-of-reconcile patch dropped a stop
// written during the start call.)
func TestPowerRequestWrittenWhileAnotherIsTaken(t *testing.T) {
	g := NewWithT(t)
	claim, sim := persistentVM(t, infrav1.RunStrategyManual)
	staysOff(t, sim, claim, "Manual does not start a new VM by itself")

	// The start call takes two seconds: time for a person to change their mind.
	sim.InjectFault(pvesim.Fault{Endpoint: startEndpoint, Count: 1, Latency: 2 * time.Second})
	annotatePowerRequest(t, claim, infrav1.PowerRequestStart)
	g.Eventually(func() int { return sim.Requests()[startEndpoint] }, 30*time.Second, 10*time.Millisecond).Should(Equal(1))
	annotatePowerRequest(t, claim, infrav1.PowerRequestStop)

	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Annotations).NotTo(HaveKey(infrav1.PowerRequestAnnotation))
		g.Expect(got.Status.LastPowerRequest).NotTo(BeNil())
		g.Expect(got.Status.LastPowerRequest.Action).To(Equal(infrav1.PowerRequestStop), "the stop was taken after the start")
		g.Expect(got.Status.LastStopCause).To(Equal(infrav1.StopCauseRequested))
		g.Expect(vmStatus(sim, claim)()).To(Equal("stopped"))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}

func commands(sim *pvesim.Simulator, vmid int) []string {
	var out []string
	for _, e := range sim.GuestExecs(vmid) {
		s := ""
		for i, a := range e.Command {
			if i > 0 {
				s += " "
			}
			s += a
		}
		out = append(out, s)
	}
	return out
}

func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// TestPersistentMachineUnderClusterAPI runs the real Cluster API controllers: a Machine whose
// MachineClaim is persistent is never marked for remediation or deleted when its VM stops; the
// run strategy restarts the VM, and deleting the Machine still destroys it.
func TestPersistentMachineUnderClusterAPI(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t, testTiming{Sweep: 300 * time.Millisecond, OrphanGrace: time.Second})
	ns := newNamespace(t)
	capiFleet(t, ns, sim)
	bootstrapSecret(t, ns, "db-0-bootstrap", controllertest.UserData)
	labels := map[string]string{clusterv1.ClusterNameLabel: "fleet"}
	claim := builder.NewMachineClaim("db-0", ns).WithLabels(labels).WithPersistent(infrav1.RunStrategyAlways).Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: ns, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: "fleet",
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("db-0-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MachineClaim", Name: "db-0"},
		},
	}
	g.Expect(env.Client.Create(ctx, machine)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g, machine)
		g.Expect(got.Spec.ProviderID).To(HavePrefix(infrav1.ProviderIDPrefix))
		g.Expect(got.Status.Phase).To(Equal(string(clusterv1.MachinePhaseProvisioned)))
		g.Expect(get(g, claim).Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning))
	}, 90*time.Second, 200*time.Millisecond).Should(Succeed())
	claim = get(g, claim)

	g.Expect(sim.PowerOff(vmidOf(claim.Status.VMID))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, claim).Status.RestartCount).To(BeNumerically(">=", 1))
		g.Expect(vmStatus(sim, claim)()).To(Equal("running"))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		got := get(g, machine)
		g.Expect(got.DeletionTimestamp.IsZero()).To(BeTrue())
		g.Expect(got.Annotations).NotTo(HaveKey(infrav1.VMStoppedAnnotation))
		g.Expect(got.Annotations).NotTo(HaveKey(clusterv1.RemediateMachineAnnotation))
	}, 2*time.Second, 100*time.Millisecond).Should(Succeed(), "a persistent VM's Machine is never retired")

	g.Expect(env.Client.Delete(ctx, machine)).To(Succeed())
	g.Eventually(func() bool { return apierrors.IsNotFound(env.Client.Get(ctx, keyOf(machine), machine)) },
		60*time.Second, 200*time.Millisecond).Should(BeTrue())
	g.Expect(vmStatus(sim, claim)()).To(Equal("gone"))
}

// TestPreStopHookTimeout: a preStop hook that outlives its timeout is reported with a HookFailed
// Event and does not keep the VM from stopping.
func TestPreStopHookTimeout(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim, sim := persistentVM(t, infrav1.RunStrategyManual, func(b *builder.MachineClaimBuilder) {
		b.WithHooks(nil, []string{"sleep", "60"}).WithTerminationGracePeriod(0).WithAnnotation(infrav1.PowerRequestAnnotation, infrav1.PowerRequestStart)
	})
	got := get(g, claim)
	p := client.MergeFrom(got.DeepCopy())
	got.Spec.Hooks.PreStop.TimeoutSeconds = 1
	g.Expect(env.Client.Patch(ctx, got, p)).To(Succeed())
	g.Eventually(vmStatus(sim, claim), 30*time.Second, 100*time.Millisecond).Should(Equal("running"))

	asked := time.Now()
	annotatePowerRequest(t, claim, infrav1.PowerRequestStop)
	g.Eventually(vmStatus(sim, claim), 30*time.Second, 50*time.Millisecond).Should(Equal("stopped"))
	g.Expect(time.Since(asked)).To(BeNumerically(">=", time.Second), "the hook had its second")
	g.Expect(commands(sim, vmidOf(claim.Status.VMID))).To(ContainElement("sleep 60"))
	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(env.Client.List(ctx, events, client.InNamespace(claim.Namespace))).To(Succeed())
		var reasons []string
		for _, e := range events.Items {
			if e.InvolvedObject.Name == claim.Name {
				reasons = append(reasons, e.Reason+": "+e.Message)
			}
		}
		g.Expect(reasons).To(ContainElement(And(HavePrefix(infrav1.HookFailedReason), ContainSubstring("did not finish within 1s"))))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
}

// TestPersistentVMCostsNoCallsOfItsOwn measures a steady persistent VM's hypervisor calls: its
// power state and resource usage come from the sweep's one cluster-wide listing, so over ten sweeps
// the VM is not read once on its own.
func TestPersistentVMCostsNoCallsOfItsOwn(t *testing.T) {
	g := NewWithT(t)
	claim, sim := persistentVM(t, infrav1.RunStrategyAlways)
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning))
		g.Expect(conditions.GetReason(got, infrav1.MachineClaimLiveMigratableCondition)).To(Equal(infrav1.LocalDisksReason))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	time.Sleep(time.Second) // let the provisioning's last reads finish
	sim.ResetRequests()
	time.Sleep(3 * time.Second) // ten sweeps at 300ms
	reqs := sim.Requests()
	t.Logf("hypervisor requests over 3s with one steady persistent VM: %v", reqs)
	g.Expect(reqs["GET /cluster/resources"]).To(BeNumerically(">=", 5), "the sweep lists the cluster")
	for key, n := range reqs {
		if strings.Contains(key, "{vmid}") || strings.HasPrefix(key, "GET /nodes/{node}/tasks") {
			g.Expect(n).To(BeZero(), "a per-VM call: %s", key)
		}
	}
}
