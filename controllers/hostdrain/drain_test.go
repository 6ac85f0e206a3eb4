package hostdrain_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// drainInventory has the runner template on every host and a shared storage the persistent VMs'
// disks are moved to, so they can migrate live. pve2 has the most free memory: a VM that may go
// anywhere goes there.
func drainInventory() pvesim.Config {
	cfg := controllertest.TemplateOnEveryHost()
	cfg.Inventory.Storages = append(cfg.Inventory.Storages, pvesim.StorageSpec{Name: "ceph", Type: "rbd", Content: []string{"images"}, Shared: true, TotalGiB: 1024})
	for i := range cfg.Inventory.Nodes {
		switch cfg.Inventory.Nodes[i].Name {
		case "pve2":
			cfg.Inventory.Nodes[i].BaseMemoryUsedMiB = 2048
		case "pve3":
			cfg.Inventory.Nodes[i].BaseMemoryUsedMiB = 16384
		}
	}
	return cfg
}

// setMaintenance sets one host's maintenance flag on the HypervisorCluster pve.
func setMaintenance(g Gomega, ns, host string, on bool) {
	controllertest.SetMaintenance(g, ns, "pve", host, on)
}

// hostStatus is the HypervisorCluster pve's drain status of host.
func hostStatus(g Gomega, ns, host string) infrav1.HostStatus {
	return hostStatusOf(g, ns, "pve", host)
}

// hostStatusOf is the drain status of host on the HypervisorCluster named cluster.
func hostStatusOf(g Gomega, ns, cluster, host string) infrav1.HostStatus {
	hc := &infrav1.HypervisorCluster{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: cluster}, hc)).To(Succeed())
	for _, h := range hc.Status.Hosts {
		if h.Name == host {
			return h
		}
	}
	return infrav1.HostStatus{}
}

func drainMigrations(g Gomega, ns string) []fleetv1.MachineMigration {
	list := &fleetv1.MachineMigrationList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns), client.HasLabels{fleetv1.DrainHostLabel})).To(Succeed())
	return list.Items
}

// TestHostDrainRespectsAntiAffinity drains hosts with the real manager and the Proxmox simulator.
// db-0 runs on pve1 and db-1 on pve2, each repelling the other (anti-affinity app=db); a runner
// claim also runs on pve1. When pve1 goes into maintenance HyperFleet migrates db-0 through a
// MachineMigration it creates and labels: to pve3, never to pve2, although pve2 has the most free
// memory. The runner is not migrated. Then pve3 goes into maintenance too: db-0 has no legal
// host left (pve1 in maintenance, pve2 runs db-1), so the drain is reported blocked, with why,
// and nothing moves.
func TestHostDrainRespectsAntiAffinity(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, drainInventory())
	startManager(t, testTiming{Sweep: 300 * time.Millisecond, OrphanGrace: time.Second})
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "pve", sim)

	apart := &infrav1.PlacementSpec{AntiAffinity: []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "db"}}}}
	db0 := controllertest.PersistentClaim(ns, "db-0", map[string]string{"app": "db"}, apart)
	db0.Spec.FailureDomain = "pve1"
	db1 := controllertest.PersistentClaim(ns, "db-1", map[string]string{"app": "db"}, apart)
	db1.Spec.FailureDomain = "pve2"
	runner := builder.NewMachineClaim("runner-0", ns).WithHypervisorCluster("pve").WithTemplateName("ubuntu-2404-runner", "runner").
		WithFailureDomain("pve1").Build()
	for _, c := range []*infrav1.MachineClaim{db0, db1, runner} {
		g.Expect(env.Client.Create(ctx, c)).To(Succeed())
	}
	controllertest.RunsOn(g, sim, db0, "pve1")
	controllertest.RunsOn(g, sim, db1, "pve2")
	g.Eventually(func() string { return get(g, runner).Status.Node }, 60*time.Second, 100*time.Millisecond).Should(Equal("pve1"))
	for _, c := range []*infrav1.MachineClaim{db0, db1} {
		onSharedStorage(g, sim, get(g, c))
	}

	setMaintenance(g, ns, "pve1", true)
	g.Eventually(func(g Gomega) {
		ms := drainMigrations(g, ns)
		g.Expect(ms).To(HaveLen(1), "one move at a time, and only for the persistent VM")
		m := ms[0]
		g.Expect(m.Spec.MachineClaimName).To(Equal("db-0"))
		g.Expect(m.Labels).To(HaveKeyWithValue(fleetv1.DrainHostLabel, "pve1"))
		g.Expect(m.Spec.Target).To(Equal("pve3"))
		g.Expect(metav1.GetControllerOf(&m).Kind).To(Equal("HypervisorCluster"))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	controllertest.RunsOn(g, sim, db0, "pve3")
	g.Eventually(func(g Gomega) {
		h := hostStatus(g, ns, "pve1")
		g.Expect(h.Maintenance).To(BeTrue())
		g.Expect(h.PersistentVMs).To(BeZero())
		g.Expect(h.PendingMigrations).To(BeZero())
		g.Expect(h.Runners).To(Equal(int32(1)), "the runner finishes its job there")
		g.Expect(h.Drained).To(BeFalse())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(get(g, runner).Status.Node).To(Equal("pve1"), "a runner is drained, not migrated")
	g.Expect(drainMigrations(g, ns)).To(HaveLen(1))

	// The runner's job is done: its claim goes, as the sweep would delete it, and pve1 is empty.
	g.Expect(env.Client.Delete(ctx, get(g, runner))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(hostStatus(g, ns, "pve1").Drained).To(BeTrue())
		hc := &infrav1.HypervisorCluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pve"}, hc)).To(Succeed())
		g.Expect(conditions.GetReason(hc, infrav1.HypervisorClusterHostsDrainedCondition)).To(Equal(infrav1.HostsDrainedReason))
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())

	setMaintenance(g, ns, "pve3", true)
	g.Eventually(func(g Gomega) {
		h := hostStatus(g, ns, "pve3")
		g.Expect(h.PersistentVMs).To(Equal(int32(1)))
		g.Expect(h.BlockedBy).To(HaveLen(1))
		g.Expect(h.BlockedBy[0]).To(ContainSubstring("db-0"))
		g.Expect(h.BlockedBy[0]).To(ContainSubstring("pve2: runs db-1, which matches anti-affinity app=db"))
		g.Expect(h.BlockedBy[0]).To(ContainSubstring("pve1: in maintenance"))
		hc := &infrav1.HypervisorCluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pve"}, hc)).To(Succeed())
		g.Expect(conditions.GetReason(hc, infrav1.HypervisorClusterHostsDrainedCondition)).To(Equal(infrav1.DrainBlockedReason))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) bool {
		events := &corev1.EventList{}
		g.Expect(env.Client.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		for _, e := range events.Items {
			if e.Reason == infrav1.DrainBlockedReason && e.InvolvedObject.Name == "pve" && strings.Contains(e.Message, "db-0") {
				return true
			}
		}
		return false
	}, 10*time.Second, 100*time.Millisecond).Should(BeTrue(), "a Warning Event says the drain is blocked")
	g.Consistently(func(g Gomega) {
		g.Expect(drainMigrations(g, ns)).To(HaveLen(1), "nothing more is moved")
		vm, _ := sim.VM(vmidOf(get(g, db0).Status.VMID))
		g.Expect(vm.Node).To(Equal("pve3"))
	}, 3*time.Second, 200*time.Millisecond).Should(Succeed())

	// Maintenance lifted on pve3: its drain stops, and with pve1 empty every drain is done.
	setMaintenance(g, ns, "pve3", false)
	g.Eventually(func(g Gomega) {
		hc := &infrav1.HypervisorCluster{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pve"}, hc)).To(Succeed())
		g.Expect(conditions.GetReason(hc, infrav1.HypervisorClusterHostsDrainedCondition)).To(Equal(infrav1.HostsDrainedReason))
		g.Expect(hc.Status.Hosts).To(HaveLen(1))
		g.Expect(hc.Status.Hosts[0].Name).To(Equal("pve1"))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(drainMigrations(g, ns)).To(HaveLen(1))
		g.Expect(get(g, db0).Status.Node).To(Equal("pve3"))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

// TestHostDrainRetiresRunners: a RunnerPool's runner on a host that goes into maintenance is not
// migrated: its Machine is marked, the pool retires it (it runs no job) and its replacement is
// placed on another host; the host is then reported drained.
func TestHostDrainRetiresRunners(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startCAPI(t)
	sim := pvesim.StartForTest(t, controllertest.TemplateOnEveryHost())
	startManager(t)
	ns := newNamespace(t)
	capiFleet(t, ns, sim)
	spec := builder.NewMachineClaim("x", ns).WithTemplateName("ubuntu-2404-runner", "runner").WithFailureDomain("").Build().Spec
	g.Expect(env.Client.Create(ctx, builder.NewMachineClaimTemplate("runner", ns).WithSpec(spec).Build())).To(Succeed())
	g.Expect(env.Client.Create(ctx, &bootstrapv1.BootstrapConfigTemplate{ObjectMeta: metav1.ObjectMeta{Name: "runner", Namespace: ns}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github-app", Namespace: ns},
		StringData: map[string]string{"app-id": "1", "private-key": "not used here"}})).To(Succeed())
	pool := builder.NewRunnerPool("linux", ns).WithCluster("fleet").WithBounds(1, 2).WithLabels("linux", "x64").
		WithTemplates("runner", "runner").Build()
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())

	var first, host string
	g.Eventually(func(g Gomega) {
		ms := poolMachines(g, pool)
		g.Expect(ms).To(HaveLen(1))
		first = ms[0].Name
		host = get(g, &infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{Name: first, Namespace: ns}}).Status.Node
		g.Expect(host).NotTo(BeEmpty())
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())

	setMaintenance(g, ns, host, true)
	g.Eventually(func(g Gomega) {
		ms := poolMachines(g, pool)
		g.Expect(ms).To(HaveLen(1))
		g.Expect(ms[0].Name).NotTo(Equal(first), "the runner on the host in maintenance was retired")
		c := get(g, &infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{Name: ms[0].Name, Namespace: ns}})
		g.Expect(c.Status.Node).NotTo(Or(BeEmpty(), Equal(host)), "its replacement goes elsewhere")
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		h := hostStatus(g, ns, host)
		g.Expect(h.Runners).To(BeZero())
		g.Expect(h.Drained).To(BeTrue())
	}, 60*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(drainMigrations(g, ns)).To(BeEmpty(), "runners are never migrated")
}
