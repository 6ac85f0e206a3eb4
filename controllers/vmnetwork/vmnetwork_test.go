package vmnetwork_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/controllers/vmnetwork"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
	"github.com/hyperfleet-io/hyperfleet/test/vspheresim"
)

func TestMain(m *testing.M) { controllertest.Main(m, "an API server and the manager") }

// ciNetwork is an isolated network with a subnet, DHCP, SNAT, a security policy and a bandwidth
// cap, on the given clusters.
func ciNetwork(ns string, clusters ...string) *fleetv1.VMNetwork {
	n := &fleetv1.VMNetwork{ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: ns}, Spec: fleetv1.VMNetworkSpec{
		Subnets: []fleetv1.VMNetworkSubnet{{CIDR: "10.20.0.0/24", Gateway: "10.20.0.1", SNAT: true,
			DHCP: &fleetv1.VMNetworkDHCP{RangeStart: "10.20.0.100", RangeEnd: "10.20.0.199", DNSServer: "10.20.0.1"}}},
		SecurityPolicy: &fleetv1.VMNetworkSecurityPolicy{Rules: []fleetv1.SecurityRule{
			{Direction: "Ingress", Action: "Allow", Protocol: "TCP", Ports: "22", Peer: "10.0.0.0/8", Comment: "ssh from the office"},
			{Direction: "Egress", Action: "Deny", Peer: "169.254.169.254"},
		}},
		QoS: &fleetv1.VMNetworkQoS{BandwidthMbps: 100},
	}}
	for _, c := range clusters {
		n.Spec.Clusters = append(n.Spec.Clusters, fleetv1.LocalObjectReference{Name: c})
	}
	return n
}

func onNetwork(ns, name string) infrav1.NIC {
	return infrav1.NIC{Name: "lan", Network: &infrav1.VMNetworkReference{Name: name, Namespace: ns}}
}

// TestNetworkOnProxmoxAndHyperV defines one VMNetwork on a Proxmox and a Hyper-V cluster with the
// real manager and both simulators, puts a persistent VM on it on each, and deletes it: each VM
// gets its address from the network's IPAM (reserved in PVE's IPAM and the Hyper-V host's DHCP
// scope, written in the guest's network-config), the network's security policy (a PVE security
// group bound to the NIC, Hyper-V port ACLs) and its bandwidth cap; deleting the network waits,
// naming the VMs, until they are gone, and then removes every object it made.
func TestNetworkOnProxmoxAndHyperV(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pve := pvesim.StartForTest(t, pvesim.Config{})
	hv := hvsim.StartHyperVForTest(t, hvsim.HyperVConfig{BootHook: func(ctx context.Context, _ hvsim.HyperVBootVM) error { <-ctx.Done(); return nil }}, "hv1")
	controllertest.StartManager(t)
	ns := controllertest.NewNamespace(t)
	controllertest.ProxmoxCluster(t, ns, "pve", pve)
	controllertest.HyperVCluster(t, ns, "hv", hv)

	network := ciNetwork(ns, "pve", "hv")
	g.Expect(controllertest.Env.Client.Create(ctx, network)).To(Succeed())
	var id string
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, network)
		g.Expect(got.Status.Phase).To(Equal(fleetv1.VMNetworkReady), "%+v", got.Status)
		g.Expect(conditions.IsTrue(got, fleetv1.ReadyCondition)).To(BeTrue())
		g.Expect(got.Status.Realizations).To(HaveLen(2))
		id = got.Status.NetworkID
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	got := controllertest.Get(g, network)
	for _, rz := range got.Status.Realizations {
		switch rz.Cluster {
		case "pve":
			g.Expect(rz.Bridge).To(Equal("v" + id))
			g.Expect(rz.SecurityGroup).To(Equal("hfnet-" + id))
		case "hv":
			g.Expect(rz.Bridge).To(Equal("hf-" + id))
			g.Expect(rz.SecurityGroup).To(BeEmpty(), "Hyper-V applies the rules to each adapter")
		}
	}
	zone, ok := pve.SDNObject("zones", "z"+id, true)
	g.Expect(ok).To(BeTrue(), "the zone is applied")
	g.Expect(zone).To(HaveKeyWithValue("dhcp", "dnsmasq"))
	_, rules, ok := pve.FirewallGroup("hfnet-" + id)
	g.Expect(ok).To(BeTrue())
	g.Expect(rules).To(HaveLen(2))
	g.Expect(hv.Network(hv.Names[0]).Switches).To(ContainElement(HaveField("Name", "hf-"+id)))

	// A persistent VM on each cluster.
	claims := map[string]*infrav1.MachineClaim{
		"pve": builder.NewMachineClaim("web-pve", ns).WithHypervisorCluster("pve").WithPersistent(infrav1.RunStrategyAlways).
			WithNICs(onNetwork("", "ci")).Build(),
		"hv": builder.NewMachineClaim("web-hv", ns).WithHypervisorCluster("hv").WithTemplateName(hvsim.HyperVTemplate).
			WithResources(2, 2048).WithPersistent(infrav1.RunStrategyAlways).WithNICs(onNetwork("", "ci")).Build(),
	}
	for _, c := range claims {
		g.Expect(controllertest.Env.Client.Create(ctx, c)).To(Succeed())
	}
	addresses := map[string]string{}
	for cluster, c := range claims {
		g.Eventually(func(g Gomega) {
			got := controllertest.Get(g, c)
			g.Expect(got.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning), "%s: %+v", cluster, got.Status.Conditions)
		}, 90*time.Second, 200*time.Millisecond).Should(Succeed())
		ip := &ipamv1.IPAddress{}
		g.Expect(controllertest.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Name + "-lan-ipv4"}, ip)).To(Succeed())
		g.Expect(ip.Spec.Address).To(HavePrefix("10.20.0."))
		g.Expect(*ip.Spec.Prefix).To(Equal(int32(24)))
		g.Expect(ip.Spec.Gateway).To(Equal("10.20.0.1"))
		g.Expect(ip.Labels).To(HaveKeyWithValue(fleetv1.VMNetworkNameLabel, ns+".ci"))
		addresses[cluster] = ip.Spec.Address
	}
	g.Expect(addresses["pve"]).NotTo(Equal(addresses["hv"]), "one IPAM for the network, whatever the hypervisor")

	pveVM, ok := pve.VM(controllertest.VMIDOf(controllertest.Get(g, claims["pve"]).Status.VMID))
	g.Expect(ok).To(BeTrue())
	g.Expect(pveVM.Net["net0"]).To(ContainSubstring("bridge=v" + id))
	g.Expect(pveVM.Net["net0"]).To(ContainSubstring("firewall=1"))
	g.Expect(pveVM.Net["net0"]).To(ContainSubstring("rate=12.5"))
	fw := pve.FirewallOf(pveVM.VMID)
	g.Expect(fw.Options).To(HaveKeyWithValue("enable", "1"))
	g.Expect(fw.Rules).To(ContainElement(And(HaveKeyWithValue("type", "group"), HaveKeyWithValue("action", "hfnet-"+id), HaveKeyWithValue("iface", "net0"))))
	g.Expect(pve.IPAM()).To(ContainElement(And(HaveField("VNet", "v"+id), HaveField("IP", addresses["pve"]))),
		"the address is reserved for the VM's MAC in PVE's IPAM")

	hvClaim := controllertest.Get(g, claims["hv"])
	var adapter hvsim.HyperVAdapter
	for _, vm := range hv.VMs(hvClaim.Status.Node) {
		if vm.ID == hvClaim.Status.VMID {
			g.Expect(vm.Adapters).To(HaveLen(1))
			adapter = vm.Adapters[0]
		}
	}
	g.Expect(adapter.Switch).To(Equal("hf-" + id))
	g.Expect(adapter.MaxBandwidth).To(Equal(int64(100_000_000)))
	g.Expect(adapter.ACLs).NotTo(BeEmpty())
	g.Expect(adapter.ACLs[len(adapter.ACLs)-1]).To(And(HaveField("Action", "Deny"), HaveField("Direction", "Inbound")), "unmatched incoming traffic is dropped")
	var reserved bool
	for _, s := range hv.Network(hvClaim.Status.Node).Scopes {
		for _, r := range s.Reservations {
			reserved = reserved || r.IPAddress == addresses["hv"]
		}
	}
	g.Expect(reserved).To(BeTrue(), "the address is reserved in the host's DHCP scope")

	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, network)
		g.Expect(got.Status.ConnectedVMs).To(ConsistOf(ns+"/web-hv", ns+"/web-pve"))
		g.Expect(got.Status.Addresses).To(Equal(&fleetv1.VMNetworkAddresses{Total: 100, Allocated: 2, Available: 98}))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

	// Deleting the network waits for its VMs.
	g.Expect(controllertest.Env.Client.Delete(ctx, network)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, network)
		c := conditions.Get(got, fleetv1.InUseCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring(ns + "/web-pve"))
		g.Expect(got.Status.Phase).To(Equal(fleetv1.VMNetworkDeleting))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	_, ok = pve.SDNObject("vnets", "v"+id, true)
	g.Expect(ok).To(BeTrue(), "the VNet stays while VMs use it")

	// The Hyper-V VM goes first: its DHCP reservation goes with it, or the address could not be
	// reserved for the next VM it is given to.
	g.Expect(controllertest.Env.Client.Delete(ctx, claims["hv"])).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := controllertest.Env.Client.Get(ctx, client.ObjectKeyFromObject(claims["hv"]), &infrav1.MachineClaim{})
		g.Expect(err).To(HaveOccurred())
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	for _, sc := range hv.Network(hvClaim.Status.Node).Scopes {
		g.Expect(sc.Reservations).NotTo(ContainElement(HaveField("IPAddress", addresses["hv"])), "the reservation is released with the VM")
	}
	g.Expect(controllertest.Env.Client.Delete(ctx, claims["pve"])).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := controllertest.Env.Client.Get(ctx, client.ObjectKeyFromObject(network), &fleetv1.VMNetwork{})
		g.Expect(err).To(HaveOccurred(), "the network is gone once its VMs are")
	}, 90*time.Second, 200*time.Millisecond).Should(Succeed())
	for _, kind := range []string{"zones", "vnets"} {
		_, ok := pve.SDNObject(kind, map[string]string{"zones": "z", "vnets": "v"}[kind]+id, true)
		g.Expect(ok).To(BeFalse(), "%s removed and applied", kind)
	}
	_, _, ok = pve.FirewallGroup("hfnet-" + id)
	g.Expect(ok).To(BeFalse())
	for _, h := range hv.Names {
		g.Expect(hv.Network(h).Switches).NotTo(ContainElement(HaveField("Name", "hf-"+id)))
	}
	var left ipamv1.IPAddressList
	g.Expect(controllertest.Env.Client.List(ctx, &left, client.InNamespace(ns))).To(Succeed())
	g.Expect(left.Items).To(BeEmpty(), "the addresses went back to the network")
}

// TestNetworkOfAnotherNamespace plays a namespace user attaching a VM to another namespace's
// network: refused until the network lists the namespace, whether the user names the network in
// a claim or makes an IPAddressClaim on it by hand; once shared, the tenant's VM joins it through
// its own HypervisorCluster on the same hypervisor.
func TestNetworkOfAnotherNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pve := pvesim.StartForTest(t, pvesim.Config{})
	controllertest.StartManager(t)
	infra, tenant := controllertest.NewNamespace(t), controllertest.NewNamespace(t)
	controllertest.ProxmoxCluster(t, infra, "pve", pve)
	controllertest.ProxmoxCluster(t, tenant, "pve", pve)
	network := ciNetwork(infra, "pve")
	g.Expect(controllertest.Env.Client.Create(ctx, network)).To(Succeed())
	g.Eventually(func(g Gomega) string { return string(controllertest.Get(g, network).Status.Phase) }, 60*time.Second, 200*time.Millisecond).
		Should(Equal(string(fleetv1.VMNetworkReady)))

	// An IPAddressClaim made by hand on the network is refused, and nothing is allocated.
	stolen := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Name: "steal", Namespace: tenant,
		Annotations: map[string]string{fleetv1.VMNetworkNamespaceAnnotation: infra}},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: fleetv1.GroupVersion.Group, Kind: "VMNetwork", Name: "ci"}}}
	g.Expect(controllertest.Env.Client.Create(ctx, stolen)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, stolen)
		c := conditions.Get(got, ipamv1.IPAddressClaimReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(vmnetwork.NotAllowedReason))
		g.Expect(c.Message).To(ContainSubstring("does not list namespace " + tenant))
		g.Expect(got.Status.AddressRef.Name).To(BeEmpty())
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

	// A claim naming the network is refused before any VM is made.
	claim := builder.NewMachineClaim("intruder", tenant).WithHypervisorCluster("pve").WithPersistent(infrav1.RunStrategyAlways).
		WithNICs(onNetwork(infra, "ci")).Build()
	g.Expect(controllertest.Env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, claim)
		c := conditions.Get(got, infrav1.MachineClaimVMProvisionedCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(infrav1.NetworkNotAllowedReason))
		g.Expect(c.Message).To(ContainSubstring("not shared with namespace " + tenant))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(controllertest.Get(g, claim).Status.VMID).To(BeEmpty())
		var addrs ipamv1.IPAddressList
		g.Expect(controllertest.Env.Client.List(ctx, &addrs, client.MatchingLabels{fleetv1.VMNetworkNameLabel: infra + ".ci"})).To(Succeed())
		g.Expect(addrs.Items).To(BeEmpty())
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

	// The administrator shares it: the tenant's VM joins the network on the same hypervisor.
	got := controllertest.Get(g, network)
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.AllowedNamespaces = []string{tenant}
	g.Expect(controllertest.Env.Client.Patch(ctx, got, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := controllertest.Get(g, claim)
		g.Expect(c.Status.Phase).To(Equal(infrav1.MachineClaimPhaseRunning), "%+v", c.Status.Conditions)
	}, 90*time.Second, 200*time.Millisecond).Should(Succeed())
	vm, ok := pve.VM(controllertest.VMIDOf(controllertest.Get(g, claim).Status.VMID))
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Net["net0"]).To(ContainSubstring("bridge=v" + got.Status.NetworkID))
	g.Expect(strings.Count(vm.Net["net0"], "bridge=")).To(Equal(1))
}

// TestNetworkOnVSphere: a VLAN network becomes a distributed port group with the tag; a network
// with DHCP and a security policy is not defined on vSphere at all, and the realisation names each
// field vSphere has no equivalent for.
func TestNetworkOnVSphere(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	controllertest.StartManager(t)
	ns := controllertest.NewNamespace(t)
	controllertest.VSphereCluster(t, ns, "vc", sim)
	lab := &fleetv1.VMNetwork{ObjectMeta: metav1.ObjectMeta{Name: "lab", Namespace: ns}, Spec: fleetv1.VMNetworkSpec{
		Clusters: []fleetv1.LocalObjectReference{{Name: "vc"}}, Type: fleetv1.VLANNetwork, VLAN: ptr.To[int32](42),
		QoS: &fleetv1.VMNetworkQoS{BandwidthMbps: 200}}}
	ci := ciNetwork(ns, "vc")
	g.Expect(controllertest.Env.Client.Create(ctx, lab)).To(Succeed())
	g.Expect(controllertest.Env.Client.Create(ctx, ci)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, lab)
		g.Expect(got.Status.Phase).To(Equal(fleetv1.VMNetworkReady), "%+v", got.Status)
		g.Expect(got.Status.Realizations[0].Bridge).To(Equal("hf-" + got.Status.NetworkID))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	id := controllertest.Get(g, lab).Status.NetworkID
	g.Expect(sim.Portgroups()).To(ContainElement(And(HaveField("Name", "hf-"+id), HaveField("VLAN", 42))))
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, ci)
		c := conditions.Get(got, fleetv1.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(fleetv1.UnsupportedReason))
		g.Expect(c.Message).To(And(ContainSubstring("spec.subnets[0].dhcp"), ContainSubstring("spec.securityPolicy")))
		g.Expect(got.Status.Phase).To(Equal(fleetv1.VMNetworkPending))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	for _, pg := range sim.Portgroups() {
		g.Expect(pg.Name).NotTo(Equal("hf-"+controllertest.Get(g, ci).Status.NetworkID), "nothing is half made")
	}
}
