package vmstorage_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

func TestMain(m *testing.M) { controllertest.Main(m, "an API server and the manager") }

const gib = int64(1) << 30

// TestVMPoolOnNetworkAndStorageTier is a platform team's GitOps set on Proxmox with the real
// manager and the simulator: one network, an adopted storage of tier fast with snapshot defaults,
// a defined storage of tier bulk, and a VMPool of three full clones on the network and tier
// fast. The fast storage has room for two 32 GiB disks: two VMs land on it with addresses from
// the network's IPAM and a snapshot schedule each, the third waits, saying how much room each
// storage has. A storage with VMs on it is not removed; the defined one is, from PVE too.
func TestVMPoolOnNetworkAndStorageTier(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	inv := pvesim.DefaultInventory()
	inv.Storages = append(inv.Storages, pvesim.StorageSpec{Name: "nvme", Type: "dir", Content: []string{"images"}, TotalGiB: 70, Nodes: []string{"pve1"}})
	sim := pvesim.StartForTest(t, pvesim.Config{Inventory: inv})
	controllertest.StartManager(t, controllertest.Timing{Sweep: 300 * time.Millisecond, OrphanGrace: time.Second})
	ns := controllertest.NewNamespace(t)
	controllertest.ProxmoxCluster(t, ns, "pve", sim)
	on := []fleetv1.LocalObjectReference{{Name: "pve"}}

	network := &fleetv1.VMNetwork{ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: ns}, Spec: fleetv1.VMNetworkSpec{Clusters: on,
		Subnets: []fleetv1.VMNetworkSubnet{{CIDR: "10.30.0.0/24", Gateway: "10.30.0.1", SNAT: true,
			DHCP: &fleetv1.VMNetworkDHCP{RangeStart: "10.30.0.10", RangeEnd: "10.30.0.20"}}}}}
	fast := &fleetv1.VMStorage{ObjectMeta: metav1.ObjectMeta{Name: "fast", Namespace: ns}, Spec: fleetv1.VMStorageSpec{Clusters: on,
		StorageName: "nvme", Adopt: true, Type: fleetv1.StorageDir, Tier: "fast",
		Snapshots: &fleetv1.VMStorageSnapshots{Schedule: "@daily", Retention: &fleetv1.SnapshotRetention{Count: ptr.To[int32](7)}}}}
	bulk := &fleetv1.VMStorage{ObjectMeta: metav1.ObjectMeta{Name: "bulk", Namespace: ns}, Spec: fleetv1.VMStorageSpec{Clusters: on,
		Type: fleetv1.StorageDir, Path: "/srv/bulk", Tier: "bulk"}}
	for _, o := range []client.Object{network, fast, bulk} {
		g.Expect(controllertest.Env.Client.Create(ctx, o)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for _, st := range []*fleetv1.VMStorage{fast, bulk} {
			got := controllertest.Get(g, st)
			g.Expect(got.Status.Phase).To(Equal(fleetv1.VMStorageReady), "%s: %+v", st.Name, got.Status)
			g.Expect(got.Labels).To(HaveKeyWithValue(fleetv1.VMStorageTierLabel, st.Spec.Tier))
		}
		g.Expect(controllertest.Get(g, network).Status.Phase).To(Equal(fleetv1.VMNetworkReady))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	got := controllertest.Get(g, fast)
	g.Expect(got.Status.Realizations).To(HaveLen(1))
	g.Expect(got.Status.Realizations[0].Nodes).To(ContainElement(And(HaveField("Node", "pve1"), HaveField("TotalBytes", 70*gib))))
	defined, _ := sim.StorageDefined("bulk")
	g.Expect(defined).To(BeTrue(), "the bulk storage is defined on PVE")

	pool := &fleetv1.VMPool{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: fleetv1.VMPoolSpec{
			Replicas: ptr.To[int32](3),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Template: fleetv1.VMPoolMachineTemplate{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"app": "db"}},
				Spec: infrav1.MachineClaimSpec{
					MachineClaimLifecycleSpec: infrav1.MachineClaimLifecycleSpec{
						Lifecycle: infrav1.LifecyclePersistent, RunStrategy: infrav1.RunStrategyAlways,
						TerminationGracePeriodSeconds: ptr.To[int32](0),
					},
					MachineClaimHardwareSpec: infrav1.MachineClaimHardwareSpec{NICs: []infrav1.NIC{{Name: "lan", Network: &infrav1.VMNetworkReference{Name: "ci"}}}},
					Template:                 infrav1.TemplateSource{ID: "9000"},
					CloneMode:                infrav1.CloneFull,
					Storage:                  &infrav1.VMStorageRequest{Tier: "fast"},
					HypervisorClusterName:    "pve",
					Cores:                    1,
				},
			},
		},
	}
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())

	var running, waiting []infrav1.MachineClaim
	g.Eventually(func(g Gomega) {
		list := &infrav1.MachineClaimList{}
		g.Expect(controllertest.Env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{fleetv1.VMPoolNameLabel: "db"})).To(Succeed())
		running, waiting = nil, nil
		for _, c := range list.Items {
			switch {
			case c.Status.Phase == infrav1.MachineClaimPhaseRunning:
				running = append(running, c)
			case conditions.GetReason(&c, infrav1.MachineClaimVMProvisionedCondition) == infrav1.WaitingForStorageReason:
				waiting = append(waiting, c)
			}
		}
		var states []string
		for _, c := range list.Items {
			states = append(states, fmt.Sprintf("%s %s %s: %s", c.Name, c.Status.Phase, conditions.GetReason(&c, infrav1.MachineClaimVMProvisionedCondition),
				conditions.GetMessage(&c, infrav1.MachineClaimVMProvisionedCondition)))
		}
		g.Expect(running).To(HaveLen(2), "%v", states)
		g.Expect(waiting).To(HaveLen(1), "%v", states)
	}, 120*time.Second, 200*time.Millisecond).Should(Succeed())
	msg := conditions.GetMessage(&waiting[0], infrav1.MachineClaimVMProvisionedCondition)
	g.Expect(msg).To(ContainSubstring("no VMStorage has room for the VM's 32.0 GiB of disks"))
	g.Expect(msg).To(ContainSubstring(ns + "/fast (pve1 "))
	g.Expect(waiting[0].Status.VMID).To(BeEmpty(), "no VM is made without room for its disks")

	for _, c := range running {
		g.Expect(c.Status.Storage).To(Equal(&infrav1.PlacedStorage{Name: "fast", Namespace: ns, StorageName: "nvme", Bytes: 32 * gib}))
		g.Expect(c.Status.Node).To(Equal("pve1"), "the only node with the storage")
		vm, ok := sim.VM(controllertest.VMIDOf(c.Status.VMID))
		g.Expect(ok).To(BeTrue())
		g.Expect(vm.Disks["scsi0"]).To(HavePrefix("nvme:"), "the full clone's disk is on the tier's storage")
		ip := &ipamv1.IPAddress{}
		g.Expect(controllertest.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-lan-ipv4"}, ip)).To(Succeed())
		g.Expect(ip.Spec.Address).To(HavePrefix("10.30.0."))
		g.Expect(sim.IPAM()).To(ContainElement(HaveField("IP", ip.Spec.Address)))
		sched := &fleetv1.MachineSnapshotSchedule{}
		g.Eventually(func() error {
			return controllertest.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-storage-snapshots"}, sched)
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "the storage's snapshot defaults")
		g.Expect(sched.Spec.Schedule).To(Equal("@daily"))
		g.Expect(sched.Spec.Retention.Count).To(Equal(ptr.To[int32](7)))
		g.Expect(metav1.IsControlledBy(sched, &c) || len(sched.OwnerReferences) == 1 && sched.OwnerReferences[0].UID == c.UID).To(BeTrue())
	}
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, fast)
		g.Expect(got.Status.Allocations).To(Equal(int32(2)))
		g.Expect(got.Status.AllocatedBytes).To(Equal(64 * gib))
		g.Expect(got.Status.UsedBytes).To(BeNumerically(">=", 64*gib), "the disks show on the storage")
	}, 90*time.Second, 200*time.Millisecond).Should(Succeed())

	// A storage with VMs on it stays; one without goes, from PVE too.
	g.Expect(controllertest.Env.Client.Delete(ctx, fast)).To(Succeed())
	g.Expect(controllertest.Env.Client.Delete(ctx, bulk)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, fast)
		c := conditions.Get(got, fleetv1.InUseCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(strings.Count(c.Message, ns+"/db-")).To(Equal(2))
		g.Expect(apierrors.IsNotFound(controllertest.Env.Client.Get(ctx, client.ObjectKeyFromObject(bulk), &fleetv1.VMStorage{}))).To(BeTrue())
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	defined, _ = sim.StorageDefined("bulk")
	g.Expect(defined).To(BeFalse(), "the definition HyperFleet made is removed")
	defined, _ = sim.StorageDefined("nvme")
	g.Expect(defined).To(BeTrue(), "an adopted storage is never removed")
}

// TestStorageRefusals: what a backend cannot give is refused with the reason, nothing is made,
// and a same-named storage HyperFleet did not create is left alone.
func TestStorageRefusals(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	controllertest.StartManager(t)
	ns := controllertest.NewNamespace(t)
	controllertest.ProxmoxCluster(t, ns, "pve", sim)
	on := []fleetv1.LocalObjectReference{{Name: "pve"}}
	encrypted := &fleetv1.VMStorage{ObjectMeta: metav1.ObjectMeta{Name: "secret", Namespace: ns}, Spec: fleetv1.VMStorageSpec{Clusters: on,
		Type: fleetv1.StorageDir, Path: "/srv/secret", Encrypted: true}}
	// local-lvm exists in the inventory and was made by a person.
	taken := &fleetv1.VMStorage{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns}, Spec: fleetv1.VMStorageSpec{Clusters: on,
		StorageName: "local-lvm", Type: fleetv1.StorageLVMThin, Pool: "pve/data"}}
	missing := &fleetv1.VMStorage{ObjectMeta: metav1.ObjectMeta{Name: "missing", Namespace: ns}, Spec: fleetv1.VMStorageSpec{Clusters: on,
		StorageName: "nowhere", Adopt: true, Type: fleetv1.StorageDir}}
	for _, o := range []client.Object{encrypted, taken, missing} {
		g.Expect(controllertest.Env.Client.Create(ctx, o)).To(Succeed())
	}
	for st, want := range map[*fleetv1.VMStorage][]string{
		encrypted: {fleetv1.UnsupportedReason, "spec.encrypted", "Proxmox Backup Server"},
		taken:     {fleetv1.NotOwnedReason, "local-lvm"},
		missing:   {fleetv1.StorageNotFoundReason, "no storage nowhere to adopt"},
	} {
		g.Eventually(func(g Gomega) {
			got := controllertest.Get(g, st)
			c := conditions.Get(got, fleetv1.ReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(want[0]), "%s: %s", st.Name, c.Message)
			for _, w := range want[1:] {
				g.Expect(c.Message).To(ContainSubstring(w))
			}
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	}
	defined, _ := sim.StorageDefined("secret")
	g.Expect(defined).To(BeFalse(), "nothing is made for a refused storage")
	defined, _ = sim.StorageDefined("local-lvm")
	g.Expect(defined).To(BeTrue())
	// Deleting the VMStorage that names a person's storage leaves that storage alone.
	g.Expect(controllertest.Env.Client.Delete(ctx, taken)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(controllertest.Env.Client.Get(ctx, client.ObjectKeyFromObject(taken), &fleetv1.VMStorage{}))
	}, 30*time.Second, 200*time.Millisecond).Should(BeTrue())
	defined, _ = sim.StorageDefined("local-lvm")
	g.Expect(defined).To(BeTrue(), "a storage HyperFleet did not make is never removed")
}

// TestVMPoolOnNetworkAndStorageTierOnHyperV is the same GitOps set on a Hyper-V host: the
// network is an internal switch with its DHCP scope, the tier's storage a folder HyperFleet
// makes, and each VM of the pool is a full copy in that folder with an address from the
// network's IPAM and the network's port ACLs.
func TestVMPoolOnNetworkAndStorageTierOnHyperV(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	hv := hvsim.StartHyperVForTest(t, hvsim.HyperVConfig{BootHook: func(ctx context.Context, _ hvsim.HyperVBootVM) error { <-ctx.Done(); return nil }}, "hv1")
	controllertest.StartManager(t)
	ns := controllertest.NewNamespace(t)
	controllertest.HyperVCluster(t, ns, "hv", hv)
	on := []fleetv1.LocalObjectReference{{Name: "hv"}}
	network := &fleetv1.VMNetwork{ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: ns}, Spec: fleetv1.VMNetworkSpec{Clusters: on,
		Subnets: []fleetv1.VMNetworkSubnet{{CIDR: "10.40.0.0/24", Gateway: "10.40.0.1", SNAT: true,
			DHCP: &fleetv1.VMNetworkDHCP{RangeStart: "10.40.0.50", RangeEnd: "10.40.0.99"}}},
		SecurityPolicy: &fleetv1.VMNetworkSecurityPolicy{Rules: []fleetv1.SecurityRule{{Direction: "Ingress", Action: "Allow", Protocol: "TCP", Ports: "443"}}}}}
	fast := &fleetv1.VMStorage{ObjectMeta: metav1.ObjectMeta{Name: "fast", Namespace: ns}, Spec: fleetv1.VMStorageSpec{Clusters: on,
		Type: fleetv1.StorageDirectory, Path: `D:\HyperFleet\fast`, Tier: "fast"}}
	for _, o := range []client.Object{network, fast} {
		g.Expect(controllertest.Env.Client.Create(ctx, o)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, fast)
		g.Expect(got.Status.Phase).To(Equal(fleetv1.VMStorageReady), "%+v", got.Status)
		g.Expect(controllertest.Get(g, network).Status.Phase).To(Equal(fleetv1.VMNetworkReady), "%+v", controllertest.Get(g, network).Status)
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())

	pool := &fleetv1.VMPool{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: fleetv1.VMPoolSpec{
			Replicas: ptr.To[int32](2),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: fleetv1.VMPoolMachineTemplate{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: infrav1.MachineClaimSpec{
					MachineClaimLifecycleSpec: infrav1.MachineClaimLifecycleSpec{
						Lifecycle: infrav1.LifecyclePersistent, RunStrategy: infrav1.RunStrategyAlways,
						TerminationGracePeriodSeconds: ptr.To[int32](0),
					},
					MachineClaimHardwareSpec: infrav1.MachineClaimHardwareSpec{NICs: []infrav1.NIC{{Name: "lan", Network: &infrav1.VMNetworkReference{Name: "ci"}}}},
					Template:                 infrav1.TemplateSource{Name: hvsim.HyperVTemplate},
					CloneMode:                infrav1.CloneFull,
					Storage:                  &infrav1.VMStorageRequest{Tier: "fast"},
					HypervisorClusterName:    "hv",
					Cores:                    2,
					MemoryMiB:                2048,
				},
			},
		},
	}
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())
	var claims []infrav1.MachineClaim
	g.Eventually(func(g Gomega) {
		list := &infrav1.MachineClaimList{}
		g.Expect(controllertest.Env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{fleetv1.VMPoolNameLabel: "web"})).To(Succeed())
		claims = list.Items
		g.Expect(claims).To(HaveLen(2))
		for _, c := range claims {
			g.Expect(c.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning), "%s: %+v", c.Name, c.Status.Conditions)
		}
	}, 120*time.Second, 200*time.Millisecond).Should(Succeed())
	for _, c := range claims {
		g.Expect(c.Status.Storage).NotTo(BeNil())
		g.Expect(c.Status.Storage.StorageName).To(Equal("fast"))
		var vm *hvsim.HyperVVM
		for _, v := range hv.VMs("hv1") {
			if v.ID == c.Status.VMID {
				vm = &v
			}
		}
		g.Expect(vm).NotTo(BeNil())
		g.Expect(vm.Disks).NotTo(BeEmpty())
		g.Expect(strings.ToLower(vm.Disks[0])).To(HavePrefix(strings.ToLower(`D:\HyperFleet\fast\`)), "the full copy is in the tier's folder")
		g.Expect(vm.Adapters).To(HaveLen(1))
		g.Expect(vm.Adapters[0].Switch).To(Equal("hf-" + controllertest.Get(g, network).Status.NetworkID))
		g.Expect(vm.Adapters[0].ACLs).NotTo(BeEmpty())
		ip := &ipamv1.IPAddress{}
		g.Expect(controllertest.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-lan-ipv4"}, ip)).To(Succeed())
		g.Expect(ip.Spec.Address).To(HavePrefix("10.40.0."))
	}
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, fast)
		g.Expect(got.Status.Allocations).To(Equal(int32(2)))
		g.Expect(got.Status.UsedBytes).To(BeNumerically(">", 0), "the copies show on the storage's volume")
	}, 90*time.Second, 200*time.Millisecond).Should(Succeed())
}
