package proxmox

import (
	"net/netip"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

func isolatedNet(id string) hypervisor.VirtualNetwork {
	return hypervisor.VirtualNetwork{ID: id, Title: "runners/build-net", Owner: hypervisor.Ownership{Cluster: clusterA},
		Kind: hypervisor.NetworkIsolated, MTU: 1450,
		Subnets: []hypervisor.Subnet{{CIDR: netip.MustParsePrefix("10.60.0.0/24"), Gateway: netip.MustParseAddr("10.60.0.1"),
			DHCPStart: netip.MustParseAddr("10.60.0.100"), DHCPEnd: netip.MustParseAddr("10.60.0.200"),
			DNSServer: netip.MustParseAddr("10.60.0.1"), SNAT: true}},
		Rules: []hypervisor.FirewallRule{
			{Direction: "in", Action: "ACCEPT", Protocol: "tcp", Ports: "22", Peer: "10.0.0.0/8", Comment: "ssh"},
			{Direction: "out", Action: "DROP", Peer: "192.168.0.0/16", Comment: "no office"},
		}}
}

// writes counts the requests that change something.
func writes(reqs map[string]int) map[string]int {
	out := map[string]int{}
	for k, n := range reqs {
		if !strings.HasPrefix(k, "GET ") {
			out[k] = n
		}
	}
	return out
}

// TestEnsureNetworkTwiceAppliesOnce: the first ensure creates the zone, VNet, subnet and group
// and applies SDN once; the second finds everything in place and writes nothing.
func TestEnsureNetworkTwiceAppliesOnce(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	n := isolatedNet("build1")

	sim.ResetRequests()
	real, err := p.EnsureNetwork(ctx, n)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(real).To(Equal(hypervisor.NetworkRealization{Bridge: "vbuild1", SecurityGroup: "hfnet-build1"}))
	first := sim.Requests()
	g.Expect(first["PUT /cluster/sdn"]).To(Equal(1))
	total := 0
	for _, c := range first {
		total += c
	}
	t.Logf("a new network costs %d calls: %v", total, first)
	g.Expect(total).To(BeNumerically("<=", 12))

	zone, ok := sim.SDNObject("zones", "zbuild1", true)
	g.Expect(ok).To(BeTrue(), "applied")
	g.Expect(zone).To(Equal(map[string]string{"type": "simple", "ipam": "pve", "dhcp": "dnsmasq", "mtu": "1450"}))
	vnet, _ := sim.SDNObject("vnets", "vbuild1", true)
	g.Expect(vnet["zone"]).To(Equal("zbuild1"))
	g.Expect(vnet["alias"]).To(Equal("hyperfleet " + OwnerTag(testInstallation, clusterA) + " runners/build-net"))
	subnet, _ := sim.SDNObject("subnets", "zbuild1-10.60.0.0-24", true)
	g.Expect(subnet).To(HaveKeyWithValue("gateway", "10.60.0.1"))
	g.Expect(subnet).To(HaveKeyWithValue("snat", "1"))
	g.Expect(subnet).To(HaveKeyWithValue("dhcp-range", "start-address=10.60.0.100,end-address=10.60.0.200"))
	comment, rules, ok := sim.FirewallGroup("hfnet-build1")
	g.Expect(ok).To(BeTrue())
	g.Expect(p.marked(comment)).To(BeTrue())
	g.Expect(rules).To(HaveLen(2))
	g.Expect(rules[0]).To(Equal(map[string]string{"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "22",
		"source": "10.0.0.0/8", "enable": "1", "comment": "ssh"}))
	g.Expect(rules[1]).To(HaveKeyWithValue("dest", "192.168.0.0/16"))

	sim.ResetRequests()
	_, err = p.EnsureNetwork(ctx, n)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(writes(sim.Requests())).To(BeEmpty(), "an unchanged network is only read")

	// A changed rule replaces the group's rules; the SDN objects stay as they are.
	n.Rules = n.Rules[:1]
	sim.ResetRequests()
	_, err = p.EnsureNetwork(ctx, n)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.Requests()).NotTo(HaveKey("PUT /cluster/sdn"))
	_, rules, _ = sim.FirewallGroup("hfnet-build1")
	g.Expect(rules).To(HaveLen(1))
}

// TestNICPolicyOnTheVM: a NIC on the network gets its rate, the firewall flag and one binding to
// the group, however often Configure runs, and the VM starts on the applied VNet.
func TestNICPolicyOnTheVM(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	real, err := p.EnsureNetwork(ctx, isolatedNet("pol1"))
	g.Expect(err).NotTo(HaveOccurred())

	ref := cloneOwned(t, p, 440, ownerFor(clusterA, "policy"))
	spec := hypervisor.ConfigSpec{NICs: []hypervisor.NIC{{MAC: "02:00:00:00:44:01", Bridge: real.Bridge,
		Policy: &hypervisor.NICPolicy{SecurityGroup: real.SecurityGroup, RateMbps: 100}}}}
	for range 2 {
		_, err = p.Configure(ctx, ref, spec)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(simVM(t, sim, 440).Net["net0"]).To(Equal("virtio=02:00:00:00:44:01,bridge=vpol1,firewall=1,rate=12.5"))
	fw := sim.FirewallOf(440)
	g.Expect(fw.Rules).To(ConsistOf(map[string]string{"type": "group", "action": "hfnet-pol1", "iface": "net0",
		"enable": "1", "comment": bindingComment}))
	g.Expect(fw.Options).To(Equal(map[string]string{"enable": "1", "policy_in": "DROP", "policy_out": "ACCEPT"}))

	task, err := p.Start(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
}

// TestNICWithoutPolicyCostsNothingMore: the VM firewall is not read or written for plain NICs.
func TestNICWithoutPolicyCostsNothingMore(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ref := cloneOwned(t, p, 441, ownerFor(clusterA, "plain"))
	sim.ResetRequests()
	_, err := p.Configure(testCtx(t), ref, hypervisor.ConfigSpec{NICs: []hypervisor.NIC{{MAC: "02:00:00:00:44:11", Firewall: true}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.Requests()).To(Equal(map[string]int{"GET /nodes/{node}/qemu/{vmid}/config": 1, "PUT /nodes/{node}/qemu/{vmid}/config": 1}))
}

func TestReserveAndReleaseAddress(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	owner := hypervisor.Ownership{Cluster: clusterA}
	_, err := p.EnsureNetwork(ctx, isolatedNet("ipam1"))
	g.Expect(err).NotTo(HaveOccurred())
	ip := netip.MustParseAddr("10.60.0.120")

	g.Expect(p.ReserveAddress(ctx, "ipam1", owner, ip, "02:00:00:00:55:01")).To(Succeed())
	g.Expect(p.ReserveAddress(ctx, "ipam1", owner, ip, "02:00:00:00:55:01")).To(Succeed(), "a retry is done")
	err = p.ReserveAddress(ctx, "ipam1", owner, ip, "02:00:00:00:55:02")
	g.Expect(err).To(MatchError(hypervisor.ErrAlreadyExists))
	err = p.ReserveAddress(ctx, "ipam1", owner, netip.MustParseAddr("10.99.0.1"), "02:00:00:00:55:03")
	g.Expect(err).To(HaveOccurred(), "outside the subnets")
	g.Expect(sim.IPAM()).To(ContainElement(pvesim.IPAMEntry{Zone: "zipam1", VNet: "vipam1", IP: "10.60.0.120", MAC: "02:00:00:00:55:01"}))

	g.Expect(p.ReleaseAddress(ctx, "ipam1", owner, ip, "02:00:00:00:55:01")).To(Succeed())
	g.Expect(p.ReleaseAddress(ctx, "ipam1", owner, ip, "02:00:00:00:55:01")).To(Succeed(), "again")
	for _, e := range sim.IPAM() {
		g.Expect(e.Gateway).To(BeTrue(), "only the gateway is left")
	}
}

func TestDeleteNetwork(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	owner := hypervisor.Ownership{Cluster: clusterA}
	_, err := p.EnsureNetwork(ctx, isolatedNet("gone1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.ReserveAddress(ctx, "gone1", owner, netip.MustParseAddr("10.60.0.150"), "02:00:00:00:66:01")).To(Succeed())

	g.Expect(p.DeleteNetwork(ctx, "gone1", owner)).To(Succeed())
	for _, kind := range []string{"zones", "vnets"} {
		for _, running := range []bool{false, true} {
			_, ok := sim.SDNObject(kind, map[string]string{"zones": "zgone1", "vnets": "vgone1"}[kind], running)
			g.Expect(ok).To(BeFalse(), "%s running=%v", kind, running)
		}
	}
	_, _, ok := sim.FirewallGroup("hfnet-gone1")
	g.Expect(ok).To(BeFalse())
	g.Expect(sim.IPAM()).To(BeEmpty())
	g.Expect(p.DeleteNetwork(ctx, "gone1", owner)).To(Succeed(), "nothing left is no error")
}

// TestForeignNetworkObjectsAreNotOwned: a zone, VNet or group of a network's name made by another
// installation, or by a person, is refused and left as it was.
func TestForeignNetworkObjectsAreNotOwned(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	ctx := testCtx(t)
	mine := newTestProvider(t, sim, clusterA)
	other := newTestProvider(t, sim, clusterA, func(c *Config) { c.InstallationID = "fedcba9876543210" })

	_, err := other.EnsureNetwork(ctx, isolatedNet("shared"))
	g.Expect(err).NotTo(HaveOccurred())
	before, _ := sim.SDNObject("vnets", "vshared", false)
	_, err = mine.EnsureNetwork(ctx, isolatedNet("shared"))
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned))
	g.Expect(mine.DeleteNetwork(ctx, "shared", hypervisor.Ownership{Cluster: clusterA})).To(MatchError(hypervisor.ErrNotOwned))
	g.Expect(mine.ReserveAddress(ctx, "shared", hypervisor.Ownership{Cluster: clusterA}, netip.MustParseAddr("10.60.0.101"), "02:00:00:00:77:01")).
		To(MatchError(hypervisor.ErrNotOwned))
	after, _ := sim.SDNObject("vnets", "vshared", false)
	g.Expect(after).To(Equal(before))
	_, rules, _ := sim.FirewallGroup("hfnet-shared")
	g.Expect(rules).To(HaveLen(2))

	// A person's applied, empty zone of our name, and a person's group without a mark.
	pc := sim.PersonClient()
	g.Expect(pc.Post(ctx, "/cluster/sdn/zones", map[string]any{"zone": "zhand", "type": "simple"}, nil)).To(Succeed())
	var upid string
	g.Expect(pc.Put(ctx, "/cluster/sdn", nil, &upid)).To(Succeed())
	_, err = mine.EnsureNetwork(ctx, isolatedNet("hand"))
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned))
	_, ok := sim.SDNObject("vnets", "vhand", false)
	g.Expect(ok).To(BeFalse(), "nothing created")

	g.Expect(pc.Post(ctx, "/cluster/firewall/groups", map[string]any{"group": "hfnet-grp"}, nil)).To(Succeed())
	_, err = mine.EnsureNetwork(ctx, isolatedNet("grp"))
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned))
	_, ok = sim.SDNObject("zones", "zgrp", false)
	g.Expect(ok).To(BeFalse(), "refused before any write")
}

func TestNetworkGaps(t *testing.T) {
	p := &Provider{}
	vlan := isolatedNet("v1")
	vlan.Kind, vlan.VLAN = hypervisor.NetworkVLAN, 42
	vxlan := hypervisor.VirtualNetwork{ID: "x1", Kind: hypervisor.NetworkVXLAN, VNI: 5000}
	for _, tc := range []struct {
		name   string
		n      hypervisor.VirtualNetwork
		fields []string
	}{
		{"isolated with DHCP", isolatedNet("i1"), nil},
		{"DHCP and SNAT on a VLAN", vlan, []string{"spec.subnets[0].dhcp", "spec.subnets[0].snat"}},
		{"VXLAN without peers", vxlan, []string{"spec.peers"}},
		{"ports without protocol", hypervisor.VirtualNetwork{Kind: hypervisor.NetworkIsolated,
			Rules: []hypervisor.FirewallRule{{Direction: "in", Action: "ACCEPT", Ports: "22"}}}, []string{"spec.securityPolicy.rules[0].ports"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fields []string
			for _, gap := range p.NetworkGaps(tc.n) {
				fields = append(fields, gap.Field)
			}
			NewWithT(t).Expect(fields).To(Equal(tc.fields))
		})
	}
}
