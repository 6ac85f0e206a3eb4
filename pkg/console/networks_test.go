package console

import (
	"sort"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

// TestNetworkAndStorageDefaults: what a network or storage written without the fields the API
// server defaults shows: an Isolated network, rules matching Any protocol, a Ready of Unknown
// before the controller's first word, and a storage named on the hypervisor as the VMStorage is.
func TestNetworkAndStorageDefaults(t *testing.T) {
	g := NewWithT(t)
	n := networkOf(&fleetv1.VMNetwork{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "net"},
		Spec: fleetv1.VMNetworkSpec{Clusters: []fleetv1.LocalObjectReference{{Name: "pve"}},
			SecurityPolicy: &fleetv1.VMNetworkSecurityPolicy{Rules: []fleetv1.SecurityRule{{Direction: "Ingress", Action: "Allow"}}}},
	})
	g.Expect(n.Type).To(Equal("Isolated"))
	g.Expect(n.SecurityRules).To(Equal([]SecurityRule{{Direction: "Ingress", Action: "Allow", Protocol: "Any"}}))
	g.Expect(n.Ready).To(Equal("Unknown"))
	g.Expect(n.Addresses).To(BeNil(), "no IPAM range counted yet")
	g.Expect(n.Clusters).To(Equal([]string{"pve"}))

	s := storageOf(&fleetv1.VMStorage{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "bulk"},
		Spec: fleetv1.VMStorageSpec{Type: fleetv1.StorageDir, Path: "/srv/vms"}})
	g.Expect(s.StorageName).To(Equal("bulk"))
	g.Expect(s.Ready).To(Equal("Unknown"))
	g.Expect(s.Replicated).To(BeNil(), "no Replicated condition without replication")
	g.Expect(s.Clusters).To(BeEmpty())
}

func TestAddressOrder(t *testing.T) {
	g := NewWithT(t)
	addrs := []string{"10.0.0.10", "not-an-address", "10.0.0.9", "10.0.0.100", "2001:db8::1", "also-not"}
	sort.Slice(addrs, func(i, j int) bool { return addressLess(addrs[i], addrs[j]) })
	g.Expect(addrs).To(Equal([]string{"10.0.0.9", "10.0.0.10", "10.0.0.100", "2001:db8::1", "also-not", "not-an-address"}))
}

func TestHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"},
		{1023, "1023 B"},
		{1536, "1.5 KiB"},
		{256 << 30, "256.0 GiB"},
		{1 << 40, "1.0 TiB"},
		{3 << 50, "3.0 PiB"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			NewWithT(t).Expect(humanBytes(tc.n)).To(Equal(tc.want))
		})
	}
}
