package vmnetwork

import (
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hfv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

func network(start, end, gateway string) *hfv1.VMNetwork {
	return &hfv1.VMNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: "infra", UID: "u-1"},
		Spec: hfv1.VMNetworkSpec{
			Clusters: []hfv1.LocalObjectReference{{Name: "pve"}},
			Subnets: []hfv1.VMNetworkSubnet{{CIDR: "10.20.0.0/24", Gateway: gateway,
				DHCP: &hfv1.VMNetworkDHCP{RangeStart: start, RangeEnd: end, DNSServer: "10.20.0.1"}}},
			SecurityPolicy: &hfv1.VMNetworkSecurityPolicy{Rules: []hfv1.SecurityRule{
				{Direction: "Ingress", Action: "Allow", Protocol: "TCP", Ports: "22,8000-8080", Peer: "10.0.0.0/8"},
				{Direction: "Egress", Action: "Reject", Protocol: "Any"},
			}},
			QoS:               &hfv1.VMNetworkQoS{BandwidthMbps: 200},
			AllowedNamespaces: []string{"team-a"},
		},
	}
}

func TestID(t *testing.T) {
	g := NewWithT(t)
	id := ID("3f1c")
	g.Expect(id).To(MatchRegexp(`^n[a-z2-7]{6}$`))
	g.Expect(ID("3f1c")).To(Equal(id), "stable")
	g.Expect(ID("3f1d")).NotTo(Equal(id), "a new network gets new objects")
}

func TestVirtual(t *testing.T) {
	g := NewWithT(t)
	v, err := Virtual(network("10.20.0.100", "10.20.0.199", "10.20.0.1"), "nabcdef", hypervisor.Ownership{Cluster: "infra/pve"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Kind).To(Equal(hypervisor.NetworkIsolated))
	g.Expect(v.Title).To(Equal("infra/ci"))
	g.Expect(v.Subnets).To(HaveLen(1))
	g.Expect(v.Subnets[0].DHCPStart).To(Equal(netip.MustParseAddr("10.20.0.100")))
	g.Expect(v.Rules).To(Equal([]hypervisor.FirewallRule{
		{Direction: "in", Action: "ACCEPT", Protocol: "tcp", Ports: "22,8000:8080", Peer: "10.0.0.0/8"},
		{Direction: "out", Action: "REJECT"},
	}))

	for name, n := range map[string]*hfv1.VMNetwork{
		"range backwards":       network("10.20.0.199", "10.20.0.100", "10.20.0.1"),
		"gateway inside range":  network("10.20.0.1", "10.20.0.199", "10.20.0.50"),
		"gateway at range edge": network("10.20.0.100", "10.20.0.199", "10.20.0.199"),
	} {
		_, err := Virtual(n, "nabcdef", hypervisor.Ownership{})
		g.Expect(err).To(HaveOccurred(), name)
	}
}

func TestAllowedAndRealization(t *testing.T) {
	g := NewWithT(t)
	n := network("10.20.0.100", "10.20.0.199", "10.20.0.1")
	n.Status.Realizations = []hfv1.VMNetworkRealization{{Cluster: "pve", Ready: true, Bridge: "vnabcdef", Endpoint: "https://pve:8006"}}
	g.Expect(Allowed(n, "infra")).To(BeTrue())
	g.Expect(Allowed(n, "team-a")).To(BeTrue())
	g.Expect(Allowed(n, "team-b")).To(BeFalse())

	own := &infrav1.HypervisorCluster{ObjectMeta: metav1.ObjectMeta{Name: "pve", Namespace: "infra"}}
	r, via, err := RealizationFor(n, own)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Bridge).To(Equal("vnabcdef"))
	g.Expect(via).To(Equal("pve"))

	other := &infrav1.HypervisorCluster{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "infra"}}
	_, _, err = RealizationFor(n, other)
	g.Expect(err).To(MatchError(ContainSubstring("not defined on HypervisorCluster other")))

	tenant := &infrav1.HypervisorCluster{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "team-a"}}
	tenant.Spec.Endpoint = "https://pve:8006"
	_, via, err = RealizationFor(n, tenant)
	g.Expect(err).NotTo(HaveOccurred(), "the same hypervisor through the tenant's own HypervisorCluster")
	g.Expect(via).To(Equal("pve"))
	tenant.Spec.Endpoint = "https://elsewhere:8006"
	_, _, err = RealizationFor(n, tenant)
	g.Expect(err).To(MatchError(ContainSubstring("with endpoint https://elsewhere:8006")))

	n.Status.Realizations[0].Ready, n.Status.Realizations[0].Reason = false, "Unsupported"
	_, _, err = RealizationFor(n, own)
	g.Expect(err).To(MatchError(ContainSubstring("not ready on HypervisorCluster pve: Unsupported")))
}

func TestNICPolicy(t *testing.T) {
	g := NewWithT(t)
	n := network("10.20.0.100", "10.20.0.199", "10.20.0.1")
	g.Expect(NICPolicy(n, hfv1.VMNetworkRealization{SecurityGroup: "hf-nabcdef"})).To(Equal(&hypervisor.NICPolicy{SecurityGroup: "hf-nabcdef", RateMbps: 200}))
	p := NICPolicy(n, hfv1.VMNetworkRealization{})
	g.Expect(p.Rules).To(HaveLen(2), "no group: the rules go on the NIC itself")
	n.Spec.SecurityPolicy, n.Spec.QoS = nil, nil
	g.Expect(NICPolicy(n, hfv1.VMNetworkRealization{})).To(BeNil())
}

func TestIPAMRange(t *testing.T) {
	g := NewWithT(t)
	r, ok, err := IPAMRange(network("10.20.0.250", "10.20.0.255", "10.20.0.1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(r.Size()).To(Equal(int32(6)))
	used := map[netip.Addr]bool{}
	var got []string
	for {
		a, ok := r.NextFree(used)
		if !ok {
			break
		}
		used[a] = true
		got = append(got, a.String())
	}
	g.Expect(got).To(Equal([]string{"10.20.0.250", "10.20.0.251", "10.20.0.252", "10.20.0.253", "10.20.0.254"}), "never the broadcast address")

	r, _, _ = IPAMRange(network("10.20.0.0", "10.20.0.3", ""))
	a, _ := r.NextFree(nil)
	g.Expect(a.String()).To(Equal("10.20.0.1"), "never the network address")

	n := network("10.20.0.100", "10.20.0.199", "10.20.0.1")
	n.Spec.Subnets[0].DHCP = nil
	_, ok, _ = IPAMRange(n)
	g.Expect(ok).To(BeFalse())
}
