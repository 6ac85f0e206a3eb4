package runnerpool_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/placement"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

func target(name, cluster, template string, priority int32) fleetv1.RunnerTarget {
	return fleetv1.RunnerTarget{Name: name, ClusterName: cluster, Priority: priority, Weight: 1,
		InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MachineClaimTemplate", Name: template}}
}

// runnersByTarget counts the pool's live Machines per target, checking each belongs to its
// target's Cluster.
func runnersByTarget(g Gomega, pool *fleetv1.RunnerPool, clusters map[string]string) map[string]int {
	out := map[string]int{}
	for _, m := range controllertest.PoolMachines(g, pool) {
		tg := m.Labels[fleetv1.RunnerTargetLabel]
		g.Expect(m.Spec.ClusterName).To(Equal(clusters[tg]), "Machine %s of target %q", m.Name, tg)
		g.Expect(m.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, clusters[tg]))
		out[tg]++
	}
	return out
}

func setPoolReplicas(t *testing.T, pool *fleetv1.RunnerPool, n int32) {
	t.Helper()
	NewWithT(t).Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &fleetv1.RunnerPool{}
		if err := controllertest.Env.Client.Get(context.Background(), controllertest.KeyOf(pool), p); err != nil {
			return err
		}
		p.Spec.Replicas = ptr.To(n)
		return controllertest.Env.Client.Update(context.Background(), p)
	})).To(Succeed())
}

func targetStatus(g Gomega, pool *fleetv1.RunnerPool, name string) fleetv1.RunnerTargetStatus {
	for _, ts := range controllertest.Get(g, pool).Status.Targets {
		if ts.Name == name {
			return ts
		}
	}
	g.Expect(name).To(BeEmpty(), "no status for target")
	return fleetv1.RunnerTargetStatus{}
}

// TestRunnerPoolSpillsOverAcrossHypervisors: one pool over a Hyper-V cluster (priority 0) and a
// Proxmox cluster (priority 1), each its own Cluster API Cluster, with the real Cluster API
// controllers and both simulators over the wire. Runners go to Hyper-V; when its hosts fail
// (every WS-Man call answers 503) its HypervisorCluster stops being Available, the target is
// reported Down and new runners spill to Proxmox; when the hosts recover new runners go to Hyper-V
// again. Each Machine belongs to its target's Cluster, and nothing already placed moves.
func TestRunnerPoolSpillsOverAcrossHypervisors(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	_, ns, _ := controllertest.StartFleet(t)
	hv := hvsim.StartHyperVForTest(t, hvsim.HyperVConfig{}, "hv1")
	hvc := controllertest.HyperVCluster(t, ns, "hv", hv)
	g.Expect(controllertest.Env.Client.Create(ctx, &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-hv", Namespace: ns},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "HypervisorCluster", Name: "hv"}},
	})).To(Succeed())
	controllertest.RunnerTemplates(t, ns)
	hvSpec := builder.NewMachineClaim("x", ns).WithTemplateName(hvsim.HyperVTemplate).WithNetwork(hvsim.HyperVSwitch, 0).Build().Spec
	g.Expect(controllertest.Env.Client.Create(ctx, builder.NewMachineClaimTemplate("runner-hv", ns).WithSpec(hvSpec).Build())).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(conditions.IsTrue(controllertest.Get(g, hvc), infrav1.HypervisorClusterAvailableCondition)).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	pool := builder.NewRunnerPool("mixed", ns).WithCluster("fleet").WithBounds(0, 8).WithReplicas(2).WithLabels("linux").
		WithTemplates("runner", "runner").
		WithTargets(target("hyperv", "fleet-hv", "runner-hv", 0), target("proxmox", "fleet", "runner", 1)).Build()
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())
	clusters := map[string]string{"hyperv": "fleet-hv", "proxmox": "fleet"}

	g.Eventually(func(g Gomega) {
		g.Expect(runnersByTarget(g, pool, clusters)).To(Equal(map[string]int{"hyperv": 2}))
		ts := targetStatus(g, pool, "hyperv")
		g.Expect(ts.State).To(Equal(string(placement.TargetReady)))
		g.Expect(ts.Replicas).To(Equal(int32(2)))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed(), "the first priority takes the runners")

	// The Hyper-V hosts fail mid-burst.
	for _, s := range hv.Servers {
		s.Inject(hvsim.Fault{HTTPStatus: 503})
	}
	g.Eventually(func(g Gomega) {
		ts := targetStatus(g, pool, "hyperv")
		g.Expect(ts.State).To(Equal(string(placement.TargetDown)))
		g.Expect(ts.Message).To(ContainSubstring("HypervisorCluster hv is not available"))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	setPoolReplicas(t, pool, 4)
	g.Eventually(func(g Gomega) {
		g.Expect(runnersByTarget(g, pool, clusters)).To(Equal(map[string]int{"hyperv": 2, "proxmox": 2}))
		g.Expect(targetStatus(g, pool, "proxmox").Replicas).To(Equal(int32(2)))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed(), "new runners spill over to Proxmox")

	// Hyper-V recovers: new runners go there again.
	for _, s := range hv.Servers {
		s.ClearFaults()
	}
	g.Eventually(func(g Gomega) {
		g.Expect(targetStatus(g, pool, "hyperv").State).To(Equal(string(placement.TargetReady)))
		g.Expect(conditions.IsTrue(controllertest.Get(g, hvc), infrav1.HypervisorClusterAvailableCondition)).To(BeTrue())
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	setPoolReplicas(t, pool, 6)
	g.Eventually(func(g Gomega) {
		g.Expect(runnersByTarget(g, pool, clusters)).To(Equal(map[string]int{"hyperv": 4, "proxmox": 2}))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed(), "and come back to Hyper-V")
	g.Consistently(func(g Gomega) {
		g.Expect(controllertest.PoolMachines(g, pool)).To(HaveLen(6), "no duplicated runners")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

// TestRunnerPoolTargetsValidation: the API server refuses a pool with both a single
// infrastructureRef and targets, or with two targets of one name.
func TestRunnerPoolTargetsValidation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := controllertest.NewNamespace(t)
	both := builder.NewRunnerPool("both", ns).WithCluster("fleet").WithTemplates("runner", "runner").Build()
	both.Spec.Template.Targets = []fleetv1.RunnerTarget{target("a", "fleet", "runner", 0)}
	err := controllertest.Env.Client.Create(ctx, both)
	g.Expect(err).To(MatchError(ContainSubstring("set exactly one of template.infrastructureRef")))

	dup := builder.NewRunnerPool("dup", ns).WithCluster("fleet").WithTemplates("runner", "runner").
		WithTargets(target("a", "fleet", "runner", 0), target("a", "fleet-hv", "runner", 1)).Build()
	g.Expect(controllertest.Env.Client.Create(ctx, dup)).To(MatchError(ContainSubstring("Duplicate value")))

	wrongKind := builder.NewRunnerPool("kind", ns).WithCluster("fleet").WithTemplates("runner", "runner").
		WithTargets(target("a", "fleet", "runner", 0)).Build()
	wrongKind.Spec.Template.Targets[0].InfrastructureRef.Kind = "ProxmoxMachineTemplate"
	g.Expect(controllertest.Env.Client.Create(ctx, wrongKind)).To(MatchError(ContainSubstring("a target's infrastructureRef must be a MachineClaimTemplate")))

	pinned := builder.NewRunnerPool("pinned", ns).WithCluster("fleet").WithTemplates("runner", "runner").
		WithTargets(target("a", "fleet", "runner", 0)).Build()
	pinned.Spec.Template.FailureDomain = "pve1"
	g.Expect(controllertest.Env.Client.Create(ctx, pinned)).To(MatchError(ContainSubstring("failureDomain names a node of one HypervisorCluster")))

	ok := builder.NewRunnerPool("ok", ns).WithCluster("fleet").WithTemplates("runner", "runner").
		WithTargets(target("a", "fleet", "runner", 0)).Build()
	g.Expect(controllertest.Env.Client.Create(ctx, ok)).To(Succeed())
}

// TestRunnerPoolSkipsAFailingTarget: a Hyper-V host whose New-HFVM fails (a Busy error in the
// module's envelope) leaves the runner's claim with a recent provisioning failure: the Hyper-V
// target is reported Failing and the next runner goes to Proxmox; once the claim provisions on its
// retry, the target is Ready again and takes the next runner.
func TestRunnerPoolSkipsAFailingTarget(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	_, ns, _ := controllertest.StartFleet(t)
	hv := hvsim.StartHyperVForTest(t, hvsim.HyperVConfig{}, "hv1")
	hvc := controllertest.HyperVCluster(t, ns, "hv", hv)
	g.Expect(controllertest.Env.Client.Create(ctx, &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-hv", Namespace: ns},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "HypervisorCluster", Name: "hv"}},
	})).To(Succeed())
	controllertest.RunnerTemplates(t, ns)
	hvSpec := builder.NewMachineClaim("x", ns).WithTemplateName(hvsim.HyperVTemplate).WithNetwork(hvsim.HyperVSwitch, 0).Build().Spec
	g.Expect(controllertest.Env.Client.Create(ctx, builder.NewMachineClaimTemplate("runner-hv", ns).WithSpec(hvSpec).Build())).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.IsTrue(controllertest.Get(g, hvc), infrav1.HypervisorClusterAvailableCondition)).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	hv.FailNext("", "New-HFVM", "Busy", "'runner' failed to be created. Not enough memory in the system.")
	pool := builder.NewRunnerPool("mixed", ns).WithCluster("fleet").WithBounds(0, 8).WithReplicas(1).WithLabels("linux").
		WithTemplates("runner", "runner").
		WithTargets(target("hyperv", "fleet-hv", "runner-hv", 0), target("proxmox", "fleet", "runner", 1)).Build()
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())
	clusters := map[string]string{"hyperv": "fleet-hv", "proxmox": "fleet"}
	g.Eventually(func(g Gomega) {
		ts := targetStatus(g, pool, "hyperv")
		g.Expect(ts.State).To(Equal(string(placement.TargetFailing)))
		g.Expect(ts.Message).To(ContainSubstring("Not enough memory"))
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed(), "the failed clone makes the target Failing")
	setPoolReplicas(t, pool, 2)
	g.Eventually(func(g Gomega) {
		g.Expect(runnersByTarget(g, pool, clusters)).To(Equal(map[string]int{"hyperv": 1, "proxmox": 1}))
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed(), "the next runner goes to Proxmox")

	g.Eventually(func(g Gomega) {
		g.Expect(targetStatus(g, pool, "hyperv").State).To(Equal(string(placement.TargetReady)))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed(), "the retry provisions the claim")
	setPoolReplicas(t, pool, 3)
	g.Eventually(func(g Gomega) {
		g.Expect(runnersByTarget(g, pool, clusters)).To(Equal(map[string]int{"hyperv": 2, "proxmox": 1}))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed(), "and Hyper-V takes runners again")
	g.Eventually(func(g Gomega) {
		g.Expect(hv.VMs("hv1")).To(HaveLen(2), "one VM per Hyper-V runner, none left by the failed clone")
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
}
