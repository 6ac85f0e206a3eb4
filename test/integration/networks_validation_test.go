package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hfv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestNetworkAndStorageValidation: the API server refuses malformed VMNetworks, VMStorages and
// claims naming them, with a message saying what is wrong.
func TestNetworkAndStorageValidation(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "netstore")
	clusters := []hfv1.LocalObjectReference{{Name: "pve"}}
	network := func(name string, mutate func(*hfv1.VMNetworkSpec)) client.Object {
		spec := hfv1.VMNetworkSpec{Clusters: clusters, Subnets: []hfv1.VMNetworkSubnet{{
			CIDR: "10.20.0.0/24", Gateway: "10.20.0.1", SNAT: true,
			DHCP: &hfv1.VMNetworkDHCP{RangeStart: "10.20.0.100", RangeEnd: "10.20.0.199", DNSServer: "10.20.0.1"},
		}}}
		mutate(&spec)
		return &hfv1.VMNetwork{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	}
	storage := func(name string, mutate func(*hfv1.VMStorageSpec)) client.Object {
		spec := hfv1.VMStorageSpec{Clusters: clusters, Type: hfv1.StorageDir, Path: "/srv/vm", Tier: "fast"}
		mutate(&spec)
		return &hfv1.VMStorage{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec}
	}
	onNetwork := func(n infrav1.NIC) infrav1.NIC {
		n.Network = &infrav1.VMNetworkReference{Name: "ci"}
		return n
	}
	claim := func(name string, mutate func(*builder.MachineClaimBuilder)) client.Object {
		b := builder.NewMachineClaim(name, ns)
		mutate(b)
		return b.Build()
	}
	cases := []struct {
		name    string
		obj     client.Object
		message string
	}{
		{name: "isolated network with DHCP, SNAT, rules and QoS", obj: network("ci", func(s *hfv1.VMNetworkSpec) {
			s.SecurityPolicy = &hfv1.VMNetworkSecurityPolicy{Rules: []hfv1.SecurityRule{
				{Direction: "Ingress", Action: "Allow", Protocol: "TCP", Ports: "22,8000-8080", Peer: "10.0.0.0/8", Comment: "ssh from the office"},
				{Direction: "Egress", Action: "Deny", Peer: "169.254.169.254"},
			}}
			s.QoS = &hfv1.VMNetworkQoS{BandwidthMbps: 1000}
			s.AllowedNamespaces = []string{"team-a"}
		})},
		{name: "VLAN network", obj: network("vlan", func(s *hfv1.VMNetworkSpec) {
			s.Type, s.VLAN, s.Uplink = hfv1.VLANNetwork, ptr.To[int32](42), "vmbr1"
		})},
		{name: "VLAN without a tag", obj: network("notag", func(s *hfv1.VMNetworkSpec) { s.Type = hfv1.VLANNetwork }),
			message: "vlan is set for, and only for, a VLAN network"},
		{name: "VXLAN without a VNI", obj: network("novni", func(s *hfv1.VMNetworkSpec) { s.Type = hfv1.VXLANNetwork }),
			message: "vni is set for, and only for, a VXLAN network"},
		{name: "uplink on an isolated network", obj: network("uplink", func(s *hfv1.VMNetworkSpec) { s.Uplink = "vmbr0" }),
			message: "uplink applies only to a VLAN network"},
		{name: "subnet with host bits", obj: network("hostbits", func(s *hfv1.VMNetworkSpec) { s.Subnets[0].CIDR = "10.20.0.5/24" }),
			message: "cidr must be a network prefix with no host bits set"},
		{name: "gateway outside the subnet", obj: network("gw", func(s *hfv1.VMNetworkSpec) { s.Subnets[0].Gateway = "10.30.0.1" }),
			message: "gateway must be inside cidr"},
		{name: "DHCP range outside the subnet", obj: network("range", func(s *hfv1.VMNetworkSpec) { s.Subnets[0].DHCP.RangeEnd = "10.20.1.10" }),
			message: "the DHCP range must be inside cidr"},
		{name: "ports without TCP or UDP", obj: network("ports", func(s *hfv1.VMNetworkSpec) {
			s.SecurityPolicy = &hfv1.VMNetworkSecurityPolicy{Rules: []hfv1.SecurityRule{{Direction: "Ingress", Action: "Allow", Ports: "22"}}}
		}), message: "ports need protocol TCP or UDP"},
		{name: "peer that is no address", obj: network("peer", func(s *hfv1.VMNetworkSpec) {
			s.SecurityPolicy = &hfv1.VMNetworkSecurityPolicy{Rules: []hfv1.SecurityRule{{Direction: "Ingress", Action: "Allow", Peer: "office"}}}
		}), message: "peer must be an IP address or a prefix"},
		{name: "network on no cluster", obj: network("nowhere", func(s *hfv1.VMNetworkSpec) { s.Clusters = nil }),
			message: "spec.clusters"},

		{name: "dir storage with a tier, snapshots and nodes", obj: storage("fast", func(s *hfv1.VMStorageSpec) {
			s.Nodes = []string{"pve1", "pve2"}
			s.Snapshots = &hfv1.VMStorageSnapshots{Schedule: "@daily", Retention: &hfv1.SnapshotRetention{Count: ptr.To[int32](7)}}
		})},
		{name: "zfspool with replication", obj: storage("zfs", func(s *hfv1.VMStorageSpec) {
			s.Type, s.Path, s.Pool = hfv1.StorageZFSPool, "", "tank/vm"
			s.Replication = &hfv1.VMStorageReplication{TargetNode: "pve2", Schedule: "*/15"}
		})},
		{name: "replication on a dir storage", obj: storage("repl", func(s *hfv1.VMStorageSpec) {
			s.Replication = &hfv1.VMStorageReplication{TargetNode: "pve2"}
		}), message: "replication needs a zfspool storage"},
		{name: "dir storage without a path", obj: storage("nopath", func(s *hfv1.VMStorageSpec) { s.Path = "" }),
			message: "path is required for a dir or directory storage"},
		{name: "adopted dir storage needs no path", obj: storage("adopted", func(s *hfv1.VMStorageSpec) { s.Path, s.Adopt = "", true })},
		{name: "nfs without its server", obj: storage("nfs", func(s *hfv1.VMStorageSpec) { s.Type, s.Export = hfv1.StorageNFS, "/export" }),
			message: "server and export are required for an nfs storage"},
		{name: "vSphere datastore defined", obj: storage("ds", func(s *hfv1.VMStorageSpec) { s.Type = hfv1.StorageDatastore }),
			message: "a vSphere datastore can only be adopted"},

		{name: "NIC on a network", obj: claim("net", func(b *builder.MachineClaimBuilder) { b.WithNICs(onNetwork(infrav1.NIC{Name: "lan"})) })},
		{name: "NIC on a network with a bridge", obj: claim("netbridge", func(b *builder.MachineClaimBuilder) {
			b.WithNICs(onNetwork(infrav1.NIC{Name: "lan", Bridge: "vmbr0"}))
		}), message: "a NIC on a network takes its bridge, VLAN, firewall and MTU from the VMNetwork"},
		{name: "NIC on a network with a static address", obj: claim("netstatic", func(b *builder.MachineClaimBuilder) {
			b.WithNICs(onNetwork(infrav1.NIC{Name: "lan", IPv4: &infrav1.StaticAddress{Address: "10.20.0.5/24"}}))
		}), message: "a NIC on a network takes its IPv4 address from the VMNetwork's IPAM"},
		{name: "storage tier on a full clone", obj: claim("tier", func(b *builder.MachineClaimBuilder) {
			b.WithClone(infrav1.CloneFull, "").WithStorage(&infrav1.VMStorageRequest{Tier: "fast"})
		})},
		{name: "storage on a linked clone without disks", obj: claim("linked", func(b *builder.MachineClaimBuilder) {
			b.WithStorage(&infrav1.VMStorageRequest{Tier: "fast"})
		}), message: "storage places a Full clone's disks and the extra disks"},
		{name: "storage by name and tier", obj: claim("nametier", func(b *builder.MachineClaimBuilder) {
			b.WithClone(infrav1.CloneFull, "").WithStorage(&infrav1.VMStorageRequest{Name: "fast", Tier: "fast"})
		}), message: "set either name (one VMStorage) or tier"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(ctx, tc.obj, client.DryRunAll)
			if tc.message == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}

	t.Run("a network's subnets and type cannot change", func(t *testing.T) {
		g := NewWithT(t)
		n := network("fixed", func(*hfv1.VMNetworkSpec) {}).(*hfv1.VMNetwork)
		g.Expect(env.Client.Create(ctx, n)).To(Succeed())
		n.Spec.Subnets[0].CIDR = "10.21.0.0/24"
		n.Spec.Subnets[0].Gateway, n.Spec.Subnets[0].DHCP = "", nil
		err := env.Client.Update(ctx, n)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("subnets' cidrs cannot change"))
	})
}

// TestStorageUpdates: a VMStorage written without adopt (omitted, as most are) can be updated
// by its controller and its users; changing what it is, is refused.
func TestStorageUpdates(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "storageupdate")
	st := &hfv1.VMStorage{ObjectMeta: metav1.ObjectMeta{Name: "bulk", Namespace: ns}, Spec: hfv1.VMStorageSpec{
		Clusters: []hfv1.LocalObjectReference{{Name: "pve"}}, Type: hfv1.StorageDir, Path: "/srv/bulk", Tier: "bulk"}}
	g.Expect(env.Client.Create(ctx, st)).To(Succeed())
	st.Labels = map[string]string{hfv1.VMStorageTierLabel: "bulk"}
	st.Spec.Tier = "slow"
	g.Expect(env.Client.Update(ctx, st)).To(Succeed(), "an update that keeps type, adopt and storageName")
	st.Spec.Adopt = true
	err := env.Client.Update(ctx, st)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("type, adopt and storageName cannot change"))
}
