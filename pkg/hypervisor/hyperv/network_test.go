package hyperv

import (
	"net/netip"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv/winrmclient"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

func isolatedNetwork() hypervisor.VirtualNetwork {
	return hypervisor.VirtualNetwork{ID: "ci1", Title: "team-a/ci", Owner: hypervisor.Ownership{Cluster: testCluster}, Kind: hypervisor.NetworkIsolated,
		Subnets: []hypervisor.Subnet{{CIDR: netip.MustParsePrefix("10.60.0.0/24"), Gateway: netip.MustParseAddr("10.60.0.1"),
			DHCPStart: netip.MustParseAddr("10.60.0.100"), DHCPEnd: netip.MustParseAddr("10.60.0.199"), DNSServer: netip.MustParseAddr("10.60.0.1"), SNAT: true}}}
}

// TestEnsureIsolatedNetwork: every host gets the internal switch hf-<ID> marked in its Notes, the
// gateway on its vEthernet adapter, the NetNat and the DHCP scope with router and resolver; a
// second ensure changes nothing; a reservation goes to every host's scope and goes away again.
func TestEnsureIsolatedNetwork(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	n := isolatedNetwork()
	real, err := env.p.EnsureNetwork(testCtx(t), n)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(real).To(Equal(hypervisor.NetworkRealization{Bridge: "hf-ci1"}))
	for _, h := range env.hosts {
		net := env.hv.Network(h)
		g.Expect(net.Switches).To(ContainElement(And(
			HaveField("Name", "hf-ci1"), HaveField("Type", "Internal"),
			HaveField("Notes", ContainSubstring("```hyperfleet-network\nmanaged-by: hyperfleet\ninstallation: "+testInstallation+"\nowner-tag: "+OwnerTag(testInstallation, testCluster)+"\nname: ci1\n")))))
		g.Expect(net.IPs).To(Equal([]hvsim.HyperVNetIP{{InterfaceAlias: "vEthernet (hf-ci1)", IPAddress: "10.60.0.1", PrefixLength: 24}}))
		g.Expect(net.NATs).To(Equal(map[string]string{"hf-ci1": "10.60.0.0/24"}))
		g.Expect(net.Scopes).To(HaveLen(1))
		g.Expect(net.Scopes[0]).To(And(HaveField("ScopeID", "10.60.0.0"), HaveField("SubnetMask", "255.255.255.0"), HaveField("StartRange", "10.60.0.100"),
			HaveField("EndRange", "10.60.0.199"), HaveField("Name", "hf-ci1"), HaveField("Router", "10.60.0.1"), HaveField("DNSServer", "10.60.0.1")))
	}
	before := env.hv.Network("hv1")
	_, err = env.p.EnsureNetwork(testCtx(t), n)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.hv.Network("hv1")).To(Equal(before), "the second ensure changes nothing")

	mac := "02:a1:b2:c3:d4:e5"
	ip := netip.MustParseAddr("10.60.0.50")
	for range 2 {
		g.Expect(env.p.ReserveAddress(testCtx(t), "ci1", n.Owner, ip, mac)).To(Succeed())
	}
	for _, h := range env.hosts {
		g.Expect(env.hv.Network(h).Scopes[0].Reservations).To(Equal([]hvsim.HyperVDHCPReservation{
			{IPAddress: "10.60.0.50", ClientID: "02-a1-b2-c3-d4-e5", Description: scopeDescription(env.p.resourceOwner(n.Owner, "ci1"))}}))
	}
	g.Expect(env.p.ReserveAddress(testCtx(t), "ci1", n.Owner, netip.MustParseAddr("192.168.9.9"), mac)).To(Succeed(), "outside every scope: nothing to reserve")
	for range 2 {
		g.Expect(env.p.ReleaseAddress(testCtx(t), "ci1", n.Owner, ip, mac)).To(Succeed())
	}
	g.Expect(env.hv.Network("hv1").Scopes[0].Reservations).To(BeEmpty())

	// A subnet change converges: the old scope, address and NAT go, the new ones come.
	n.Subnets[0] = hypervisor.Subnet{CIDR: netip.MustParsePrefix("10.61.0.0/16"), Gateway: netip.MustParseAddr("10.61.0.1")}
	_, err = env.p.EnsureNetwork(testCtx(t), n)
	g.Expect(err).NotTo(HaveOccurred())
	net := env.hv.Network("hv1")
	g.Expect(net.IPs).To(Equal([]hvsim.HyperVNetIP{{InterfaceAlias: "vEthernet (hf-ci1)", IPAddress: "10.61.0.1", PrefixLength: 16}}))
	g.Expect(net.NATs).To(BeEmpty())
	g.Expect(net.Scopes).To(BeEmpty())
}

// TestDeleteNetwork: deletion removes the NAT, scope, address and switch, and again finds nothing;
// a switch a VM is still connected to is refused with ErrBusy and Hyper-V's host named.
func TestDeleteNetwork(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	n := isolatedNetwork()
	real, err := env.p.EnsureNetwork(testCtx(t), n)
	g.Expect(err).NotTo(HaveOccurred())
	ref := cloneRunner(t, env.p, "hv1", "runner-n", "cn")
	_, err = env.p.Configure(testCtx(t), ref, hypervisor.ConfigSpec{NICs: []hypervisor.NIC{{Name: "lan", Bridge: real.Bridge, MAC: "02:00:00:00:00:01"}}})
	g.Expect(err).NotTo(HaveOccurred())

	err = env.p.DeleteNetwork(testCtx(t), "ci1", n.Owner)
	g.Expect(err).To(MatchError(hypervisor.ErrBusy))
	g.Expect(err.Error()).To(ContainSubstring("runner-n"))
	g.Expect(env.hv.Network("hv1").Switches).To(ContainElement(HaveField("Name", "hf-ci1")), "nothing removed")
	g.Expect(env.hv.Network("hv1").NATs).To(HaveKey("hf-ci1"))

	_, err = env.p.Stop(testCtx(t), ref)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = env.p.Delete(testCtx(t), ref)
	g.Expect(err).NotTo(HaveOccurred())
	for range 2 {
		g.Expect(env.p.DeleteNetwork(testCtx(t), "ci1", n.Owner)).To(Succeed())
	}
	for _, h := range env.hosts {
		net := env.hv.Network(h)
		g.Expect(net.Switches).To(Equal([]hvsim.HyperVSwitchInfo{{Name: runnerSwitch, Type: "External"}}))
		g.Expect(net.IPs).To(BeEmpty())
		g.Expect(net.NATs).To(BeEmpty())
		g.Expect(net.Scopes).To(BeEmpty())
	}
}

// TestNetworkOnHostWithoutDHCPRole: a host without the DHCP Server role refuses a network with a
// DHCP range, classified unsupported with the reason, before anything is made; without a range
// the network is made there.
func TestNetworkOnHostWithoutDHCPRole(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	g.Expect(env.hv.SetDHCPServerRole("hv2", false)).To(Succeed())
	n := isolatedNetwork()
	_, err := env.p.EnsureNetwork(testCtx(t), n)
	g.Expect(err).To(MatchError(hypervisor.ErrUnsupported))
	g.Expect(err.Error()).To(ContainSubstring("DHCP Server role is not installed on HV2"))
	g.Expect(env.hv.Network("hv2").Switches).NotTo(ContainElement(HaveField("Name", "hf-ci1")))

	n.Subnets[0].DHCPStart, n.Subnets[0].DHCPEnd = netip.Addr{}, netip.Addr{}
	_, err = env.p.EnsureNetwork(testCtx(t), n)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.p.ReserveAddress(testCtx(t), "ci1", n.Owner, netip.MustParseAddr("10.60.0.50"), "02:00:00:00:00:01")).To(Succeed(), "no DHCP, no reservation")
	g.Expect(env.p.DeleteNetwork(testCtx(t), "ci1", n.Owner)).To(Succeed())
}

// TestForeignSwitchAndScopeAreNotOwned: a switch named like the network but without this
// installation's mark (another installation's, or forged without one), and a DHCP scope for the
// subnet described otherwise, are refused with ErrNotOwned and left as they were.
func TestForeignSwitchAndScopeAreNotOwned(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	n := isolatedNetwork()
	other := env.provider(t, otherInstall, testCluster)
	_, err := other.EnsureNetwork(testCtx(t), n)
	g.Expect(err).NotTo(HaveOccurred())
	before := env.hv.Network("hv1")
	_, err = env.p.EnsureNetwork(testCtx(t), n)
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned))
	g.Expect(env.p.DeleteNetwork(testCtx(t), "ci1", n.Owner)).To(MatchError(hypervisor.ErrNotOwned))
	g.Expect(env.p.ReserveAddress(testCtx(t), "ci1", n.Owner, netip.MustParseAddr("10.60.0.9"), "02:00:00:00:00:09")).To(MatchError(hypervisor.ErrNotOwned))
	g.Expect(env.hv.Network("hv1")).To(Equal(before))
	g.Expect(other.DeleteNetwork(testCtx(t), "ci1", n.Owner)).To(Succeed())

	g.Expect(env.hv.AddSwitchWithNotes("hv1", "hf-ci1", "Internal", "lab switch\n\n```hyperfleet-network\nmanaged-by: hyperfleet\nname: ci1\n```")).To(Succeed())
	g.Expect(env.hv.AddDHCPScope("hv2", hvsim.HyperVDHCPScope{ScopeID: "10.60.0.0", SubnetMask: "255.255.255.0", StartRange: "10.60.0.10", EndRange: "10.60.0.20", Name: "lab"})).To(Succeed())
	hv1, hv2 := env.hv.Network("hv1"), env.hv.Network("hv2")
	_, err = env.p.EnsureNetwork(testCtx(t), n)
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned))
	g.Expect(err.Error()).To(And(ContainSubstring("virtual switch 'hf-ci1' on HV1"), ContainSubstring("DHCP scope 10.60.0.0 on HV2")))
	g.Expect(env.hv.Network("hv1")).To(Equal(hv1))
	g.Expect(env.hv.Network("hv2").Scopes).To(Equal(hv2.Scopes))
	g.Expect(env.p.DeleteNetwork(testCtx(t), "ci1", n.Owner)).To(MatchError(hypervisor.ErrNotOwned))
	g.Expect(env.hv.Network("hv1")).To(Equal(hv1))
	for _, h := range env.hosts {
		g.Expect(env.hv.ForeignStatements(h)).To(BeEmpty())
	}
}

// TestVLANNetworkAndPortPolicy: a VLAN network is its uplink and tag, which the adapter carries;
// the network's rules become the adapter's ACLs in order, heaviest first, above the defaults and
// the final Deny Inbound; the bandwidth cap is set in bits per second; a retried Configure adds
// no ACL twice, and a policy without rules clears them.
func TestVLANNetworkAndPortPolicy(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	n := hypervisor.VirtualNetwork{ID: "db", Kind: hypervisor.NetworkVLAN, Uplink: runnerSwitch, VLAN: 120, Owner: hypervisor.Ownership{Cluster: testCluster},
		Subnets: []hypervisor.Subnet{{CIDR: netip.MustParsePrefix("10.120.0.0/24"), Gateway: netip.MustParseAddr("10.120.0.1")}},
		Rules: []hypervisor.FirewallRule{
			{Direction: "in", Action: "ACCEPT", Protocol: "tcp", Ports: "22,8000:8080", Peer: "10.0.0.0/8"},
			{Direction: "in", Action: "ACCEPT", Protocol: "icmp"},
			{Direction: "out", Action: "DROP", Protocol: "udp", Ports: "53", Peer: "8.8.8.8"},
		}}
	g.Expect(env.p.NetworkGaps(n)).To(BeEmpty())
	real, err := env.p.EnsureNetwork(testCtx(t), n)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(real).To(Equal(hypervisor.NetworkRealization{Bridge: runnerSwitch, VLAN: 120}))

	ref := cloneRunner(t, env.p, "hv1", "runner-v", "cv")
	spec := hypervisor.ConfigSpec{NICs: []hypervisor.NIC{{Name: "lan", Bridge: real.Bridge, VLAN: real.VLAN, MAC: "02:00:00:00:01:20",
		Policy: &hypervisor.NICPolicy{Rules: n.Rules, RateMbps: 250}}}}
	for range 2 {
		_, err = env.p.Configure(testCtx(t), ref, spec)
		g.Expect(err).NotTo(HaveOccurred())
	}
	vm := findVM(g, env.hv.VMs("hv1"), ref.ID)
	g.Expect(vm.Adapters).To(HaveLen(1))
	a := vm.Adapters[0]
	g.Expect(a.Switch).To(Equal(runnerSwitch))
	g.Expect(a.VLAN).To(Equal(120))
	g.Expect(a.MaxBandwidth).To(Equal(int64(250_000_000)))
	g.Expect(a.ACLs).To(Equal([]hvsim.HyperVACL{
		{Action: "Allow", Direction: "Inbound", RemoteIPAddress: "10.0.0.0/8", LocalPort: "22", Protocol: "TCP", Weight: 103, Stateful: true},
		{Action: "Allow", Direction: "Inbound", RemoteIPAddress: "10.0.0.0/8", LocalPort: "8000-8080", Protocol: "TCP", Weight: 102, Stateful: true},
		{Action: "Allow", Direction: "Inbound", Protocol: "1", Weight: 101},
		{Action: "Deny", Direction: "Outbound", RemoteIPAddress: "8.8.8.8", RemotePort: "53", Protocol: "UDP", Weight: 100},
		{Action: "Allow", Direction: "Inbound", LocalPort: "68", RemotePort: "67", Protocol: "UDP", Weight: 5},
		{Action: "Allow", Direction: "Inbound", Protocol: "58", Weight: 4},
		{Action: "Allow", Direction: "Outbound", Protocol: "TCP", Weight: 3, Stateful: true},
		{Action: "Allow", Direction: "Outbound", Protocol: "UDP", Weight: 2, Stateful: true},
		{Action: "Deny", Direction: "Inbound", Weight: 1},
	}), "in order, no duplicates after the retry")

	spec.NICs[0].Policy = &hypervisor.NICPolicy{}
	_, err = env.p.Configure(testCtx(t), ref, spec)
	g.Expect(err).NotTo(HaveOccurred())
	a = findVM(g, env.hv.VMs("hv1"), ref.ID).Adapters[0]
	g.Expect(a.ACLs).To(BeEmpty())
	g.Expect(a.MaxBandwidth).To(BeZero())

	_, err = env.p.EnsureNetwork(testCtx(t), hypervisor.VirtualNetwork{ID: "db2", Kind: hypervisor.NetworkVLAN, Uplink: "trunk", VLAN: 7})
	g.Expect(err).To(MatchError(hypervisor.ErrNotFound))
	g.Expect(err.Error()).To(ContainSubstring("virtual switch 'trunk'"))
	g.Expect(env.p.DeleteNetwork(testCtx(t), "db", n.Owner)).To(Succeed(), "nothing of a VLAN network is on the hosts")
}

func findVM(g Gomega, vms []hvsim.HyperVVM, id string) hvsim.HyperVVM {
	for _, vm := range vms {
		if strings.EqualFold(vm.ID, id) {
			return vm
		}
	}
	g.Expect(id).To(BeEmpty(), "VM not found")
	return hvsim.HyperVVM{}
}

// TestNetworkGaps: what Hyper-V cannot give is named with its field, without a call.
func TestNetworkGaps(t *testing.T) {
	p := &Provider{cfg: Config{InstallationID: testInstallation, Cluster: testCluster}, ownerTag: OwnerTag(testInstallation, testCluster)}
	many := make([]hypervisor.FirewallRule, 20)
	for i := range many {
		many[i] = hypervisor.FirewallRule{Direction: "in", Action: "ACCEPT", Protocol: "tcp", Ports: "1000"}
	}
	for name, tc := range map[string]struct {
		n     hypervisor.VirtualNetwork
		field string
		want  string
	}{
		"vxlan":          {hypervisor.VirtualNetwork{ID: "x", Kind: hypervisor.NetworkVXLAN, VNI: 5}, "spec.type", "no VXLAN without the SDN Network Controller"},
		"vlan no uplink": {hypervisor.VirtualNetwork{ID: "x", Kind: hypervisor.NetworkVLAN, VLAN: 5}, "spec.uplink", "needs the existing virtual switch"},
		"mtu":            {hypervisor.VirtualNetwork{ID: "x", Kind: hypervisor.NetworkIsolated, MTU: 9000}, "spec.mtu", "*JumboPacket"},
		"reject":         {hypervisor.VirtualNetwork{ID: "x", Kind: hypervisor.NetworkIsolated, Rules: []hypervisor.FirewallRule{{Direction: "in", Action: "REJECT"}}}, "spec.securityPolicy.rules[0]", "REJECT is not available"},
		"ports any":      {hypervisor.VirtualNetwork{ID: "x", Kind: hypervisor.NetworkIsolated, Rules: []hypervisor.FirewallRule{{Direction: "in", Action: "DROP", Ports: "22"}}}, "spec.securityPolicy.rules[0]", "need protocol tcp or udp"},
		"too many rules": {hypervisor.VirtualNetwork{ID: "x", Kind: hypervisor.NetworkIsolated, Rules: many}, "spec.securityPolicy.rules", "at most 24"},
		"long id":        {hypervisor.VirtualNetwork{ID: "toolongid", Kind: hypervisor.NetworkIsolated}, "status.id", "1 to 7"},
		"vlan dhcp": {hypervisor.VirtualNetwork{ID: "x", Kind: hypervisor.NetworkVLAN, Uplink: "u", VLAN: 5, Subnets: []hypervisor.Subnet{{CIDR: netip.MustParsePrefix("10.0.0.0/24"),
			DHCPStart: netip.MustParseAddr("10.0.0.10"), DHCPEnd: netip.MustParseAddr("10.0.0.20")}}}, "spec.subnets[0].dhcp", "every host's DHCP Server"},
		"two snat": {hypervisor.VirtualNetwork{ID: "x", Kind: hypervisor.NetworkIsolated, Subnets: []hypervisor.Subnet{
			{CIDR: netip.MustParsePrefix("10.0.0.0/24"), Gateway: netip.MustParseAddr("10.0.0.1"), SNAT: true},
			{CIDR: netip.MustParsePrefix("10.0.1.0/24"), Gateway: netip.MustParseAddr("10.0.1.1"), SNAT: true}}}, "spec.subnets", "one internal prefix per NetNat"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(p.NetworkGaps(tc.n)).To(ContainElement(And(HaveField("Field", tc.field), HaveField("Reason", ContainSubstring(tc.want)))))
		})
	}
}

func goldenNetwork(t *testing.T, p *Provider) networkInput {
	t.Helper()
	n := isolatedNetwork()
	in := p.networkOf(n.ID, n.Owner)
	in.Kind = string(n.Kind)
	in.Notes = resourceMark(networkBlockStart, "HyperFleet network team-a/ci.", in.Owner)
	in.Subnets = []subnetInput{subnetOf(n.Subnets[0])}
	return in
}

func goldenReservation(p *Provider) networkInput {
	in := p.networkOf("ci1", ownerFixture())
	in.IPAddress, in.ClientID = "10.60.0.50", "02-a1-b2-c3-d4-e5"
	return in
}

// worstRules are rules whose entries fill an adapter's ACLs with the longest fields.
func worstRules() []hypervisor.FirewallRule {
	var rules []hypervisor.FirewallRule
	for range maxACLs - len(defaultACLs) {
		rules = append(rules, hypervisor.FirewallRule{Direction: "out", Action: "ACCEPT", Protocol: "tcp", Ports: "60000:65535", Peer: "2001:db8:ffff:ffff:ffff:ffff:ffff:0/112"})
	}
	return rules
}

func goldenPortPolicy(t *testing.T, id string, expect expectation) portPolicyInput {
	t.Helper()
	pols, err := policyInputs("golden", []hypervisor.NIC{{MAC: "02:a1:b2:c3:d4:e5", Policy: &hypervisor.NICPolicy{RateMbps: 100,
		Rules: []hypervisor.FirewallRule{{Direction: "in", Action: "ACCEPT", Protocol: "tcp", Ports: "22", Peer: "10.0.0.0/8"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	pol := pols[0]
	pol.ID, pol.Expect = id, expect
	return pol
}

// TestPortPolicyFitsACommandLine: the largest policy HyperFleet sends (maxACLs entries with the
// longest fields) fits cmd.exe's command line, so maxACLs is safe.
func TestPortPolicyFitsACommandLine(t *testing.T) {
	g := NewWithT(t)
	pols, err := policyInputs("fit", []hypervisor.NIC{{MAC: "02:a1:b2:c3:d4:e5", Policy: &hypervisor.NICPolicy{RateMbps: 100000, Rules: worstRules()}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pols[0].Acls).To(HaveLen(maxACLs))
	pol := pols[0]
	pol.ID, pol.Expect = "6f1d3c2a-8e4b-4f0e-9a57-2b1c7d9e4a10", expectation{Installation: testInstallation, OwnerTag: OwnerTag(testInstallation, testCluster), ClaimID: strings.Repeat("c", 36)}
	script, err := callScript(DefaultModuleRoot, fnSetPortPolicy, pol)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(winrmclient.EncodeCommand(script))).To(BeNumerically("<=", 8191))
}

// TestNetworkFitsACommandLine: the largest network input (maxSubnets subnets with every field and
// the longest title the Notes keep) fits cmd.exe's command line.
func TestNetworkFitsACommandLine(t *testing.T) {
	g := NewWithT(t)
	p := &Provider{cfg: Config{InstallationID: testInstallation, Cluster: testCluster}, ownerTag: OwnerTag(testInstallation, testCluster)}
	in := goldenNetwork(t, p)
	in.Notes = resourceMark(networkBlockStart, strings.Repeat("t", 2*maxNotesText), in.Owner)
	for len(in.Subnets) < maxSubnets {
		in.Subnets = append(in.Subnets, subnetOf(hypervisor.Subnet{CIDR: netip.MustParsePrefix("100.100.100.0/24"), Gateway: netip.MustParseAddr("100.100.100.100"),
			DHCPStart: netip.MustParseAddr("100.100.100.101"), DHCPEnd: netip.MustParseAddr("100.100.100.254"), DNSServer: netip.MustParseAddr("100.100.100.100")}))
	}
	script, err := callScript(DefaultModuleRoot, fnSetNetwork, in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(winrmclient.EncodeCommand(script))).To(BeNumerically("<=", 8191))
}
