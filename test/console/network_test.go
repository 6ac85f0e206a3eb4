package console

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/console"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
)

const gib = int64(1) << 30

// The clusters the test networks and storages name exist nowhere, so a manager started by another
// test defines nothing on a simulator for them.
const (
	netPVE = "net-pve"
	netHV  = "net-hv"
)

// create makes obj and deletes it when the test ends.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	NewWithT(t).Expect(env.Client.Create(context.Background(), obj)).To(Succeed())
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
}

// network creates a VLAN network with a DHCP range of 100 addresses, a security policy and a
// bandwidth cap, reported as HyperFleet's controller would: defined on net-pve, refused on net-hv
// as Unsupported, with allocated of its addresses taken (status is written here: no controller
// runs).
func network(t *testing.T, namespace, name string, allocated int32, shared ...string) *fleetv1.VMNetwork {
	t.Helper()
	n := &fleetv1.VMNetwork{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: fleetv1.VMNetworkSpec{
			Clusters: []fleetv1.LocalObjectReference{{Name: netPVE}, {Name: netHV}},
			Type:     fleetv1.VLANNetwork, VLAN: ptr.To[int32](120), Uplink: "vmbr1",
			Subnets: []fleetv1.VMNetworkSubnet{{CIDR: "10.20.0.0/24", Gateway: "10.20.0.1",
				DHCP: &fleetv1.VMNetworkDHCP{RangeStart: "10.20.0.100", RangeEnd: "10.20.0.199", DNSServer: "10.20.0.1"}}},
			SecurityPolicy: &fleetv1.VMNetworkSecurityPolicy{Rules: []fleetv1.SecurityRule{
				{Direction: "Ingress", Action: "Allow", Protocol: "TCP", Ports: "22", Peer: "10.0.0.0/8", Comment: "ssh from the office"},
				{Direction: "Egress", Action: "Deny", Protocol: "Any", Peer: "192.168.0.0/16"},
			}},
			QoS:               &fleetv1.VMNetworkQoS{BandwidthMbps: 100},
			AllowedNamespaces: shared,
		},
	}
	create(t, n)
	now := metav1.Now()
	n.Status = fleetv1.VMNetworkStatus{
		Phase: fleetv1.VMNetworkDegraded,
		Conditions: []metav1.Condition{{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: fleetv1.PartiallyRealizedReason,
			Message: "defined on net-pve; not on net-hv: security policy rule 2", LastTransitionTime: now}},
		Realizations: []fleetv1.VMNetworkRealization{
			{Cluster: netPVE, Ready: true, Bridge: "hf120", SecurityGroup: "hfsg-lab"},
			{Cluster: netHV, Ready: false, Reason: fleetv1.UnsupportedReason,
				Message: "securityPolicy.rules[1]: Hyper-V port ACLs cannot match a remote prefix on egress"},
		},
		Addresses:    &fleetv1.VMNetworkAddresses{Total: 100, Allocated: allocated, Available: 100 - allocated},
		ConnectedVMs: []string{namespace + "/net-vm-a", namespace + "/net-vm-b"}, ConnectedVMCount: 2,
	}
	NewWithT(t).Expect(env.Client.Status().Update(context.Background(), n)).To(Succeed())
	return n
}

// networkVM creates a claim with a NIC on the network and the address HyperFleet's IPAM would
// have allocated to it: an IPAddressClaim the claim controls and its IPAddress, labelled with the
// network.
func networkVM(t *testing.T, n *fleetv1.VMNetwork, claim, address string) {
	t.Helper()
	c := builder.NewMachineClaim(claim, n.Namespace).WithTemplate(infrav1.TemplateSource{ID: "9000"}).WithHypervisorCluster(netPVE).
		WithBootstrapSecret(claim + "-user-data").Build()
	create(t, c)
	pool := ipamv1.IPPoolReference{APIGroup: fleetv1.GroupVersion.Group, Kind: "VMNetwork", Name: n.Name}
	ipClaim := &ipamv1.IPAddressClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim + "-eth0-ipv4", Namespace: n.Namespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: infrav1.GroupVersion.String(), Kind: "MachineClaim", Name: c.Name,
				UID: c.UID, Controller: ptr.To(true)}}},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: pool},
	}
	create(t, ipClaim)
	create(t, &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: ipClaim.Name, Namespace: n.Namespace,
			Labels: map[string]string{fleetv1.VMNetworkNameLabel: n.Namespace + "." + n.Name}},
		Spec: ipamv1.IPAddressSpec{ClaimRef: ipamv1.IPAddressClaimReference{Name: ipClaim.Name}, PoolRef: pool,
			Address: address, Prefix: ptr.To[int32](24), Gateway: "10.20.0.1"},
	})
}

// storage creates a replicated ZFS storage of tier fast on net-pve, reported with two nodes'
// capacity (one cannot reach it) and one VM placed on it.
func storage(t *testing.T, namespace, name string) *fleetv1.VMStorage {
	t.Helper()
	st := &fleetv1.VMStorage{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: fleetv1.VMStorageSpec{Clusters: []fleetv1.LocalObjectReference{{Name: netPVE}}, Type: fleetv1.StorageZFSPool,
			Pool: "rpool/vms", Tier: "fast", Replication: &fleetv1.VMStorageReplication{TargetNode: "pve2", Schedule: "*/15"}},
	}
	create(t, st)
	now := metav1.Now()
	st.Status = fleetv1.VMStorageStatus{
		Phase: fleetv1.VMStorageReady,
		Conditions: []metav1.Condition{
			{Type: fleetv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: fleetv1.RealizedReason, Message: "defined on net-pve", LastTransitionTime: now},
			{Type: fleetv1.ReplicatedCondition, Status: metav1.ConditionFalse, Reason: "ReplicationFailed",
				Message: "net-vm-s: last replication to pve2 failed", LastTransitionTime: now},
		},
		Realizations: []fleetv1.VMStorageRealization{{Cluster: netPVE, Ready: true, Nodes: []fleetv1.VMStorageNode{
			{Node: "pve1", Active: true, TotalBytes: 1024 * gib, UsedBytes: 256 * gib, AvailableBytes: 768 * gib},
			{Node: "pve3", Active: false},
		}}},
		UsedBytes: 256 * gib, AvailableBytes: 768 * gib, Allocations: 1, AllocatedBytes: 32 * gib,
		LastReplication: &metav1.Time{Time: now.Add(-10 * time.Minute)},
	}
	NewWithT(t).Expect(env.Client.Status().Update(context.Background(), st)).To(Succeed())
	return st
}

// storageVM creates a claim whose disks HyperFleet placed on storage st (nil for none).
func storageVM(t *testing.T, namespace, name string, st *fleetv1.VMStorage) {
	t.Helper()
	c := builder.NewMachineClaim(name, namespace).WithTemplate(infrav1.TemplateSource{ID: "9000"}).WithHypervisorCluster(netPVE).
		WithBootstrapSecret(name + "-user-data").Build()
	create(t, c)
	c.Status.Node, c.Status.Phase = "pve1", infrav1.MachineClaimPhaseReady
	if st != nil {
		c.Status.Storage = &infrav1.PlacedStorage{Name: st.Name, Namespace: st.Namespace, StorageName: st.Name, Bytes: 32 * gib}
	}
	NewWithT(t).Expect(env.Client.Status().Update(context.Background(), c)).To(Succeed())
}

// grantIPAMView lets user read IPAddresses and IPAddressClaims in namespace, which the built-in
// view and edit roles do not hold.
func grantIPAMView(t *testing.T, namespace, user string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "console-test-ipam-view"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{ipamv1.GroupVersion.Group}, Resources: []string{"ipaddresses", "ipaddressclaims"},
			Verbs: []string{"get", "list", "watch"}}}}))).To(Succeed())
	g.Expect(env.GrantClusterRole(ctx, namespace, "console-test-ipam-view", user)).To(Succeed())
}

func getJSON[T any](t *testing.T, f *fixture, token, path string) (int, T) {
	t.Helper()
	var v T
	r := f.call(t, http.MethodGet, path, token, nil)
	if r.Status == http.StatusOK {
		r.decode(t, &v)
	}
	return r.Status, v
}

// TestNetworksAndStoragesThroughTheAPI: a network is listed with its type, VLAN, subnets, rules,
// QoS, phase, Ready reason and per-cluster realisations with their reasons, and its address use;
// its detail names each allocated address and the VM holding it, in address order. A storage is
// listed with its tier, capacity per node, allocations and replication, and its detail names the
// VMs placed on it. A person with view but no right to read IPAddresses gets the network without
// its addresses, told why.
func TestNetworksAndStoragesThroughTheAPI(t *testing.T) {
	g := NewWithT(t)
	f := startConsole(t)
	grantIPAMView(t, teamA, "oidc:"+alice.Email)
	n := network(t, teamA, "lab-net", 2, teamB)
	networkVM(t, n, "net-vm-a", "10.20.0.101")
	networkVM(t, n, "net-vm-b", "10.20.0.100")
	other := network(t, teamA, "other-net", 1)
	networkVM(t, other, "net-vm-c", "10.20.0.150")
	st := storage(t, teamA, "fast-zfs")
	storageVM(t, teamA, "net-vm-s", st)
	storageVM(t, teamA, "net-vm-elsewhere", nil)
	tok := f.token(t, alice, fakeoidc.TokenOptions{})

	status, networks := getJSON[console.List[console.Network]](t, f, tok, "/api/v1/networks?namespace="+teamA)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(networks.Items).To(ContainElement(And(HaveField("Namespace", teamA), HaveField("Name", "lab-net"), HaveField("Type", "VLAN"),
		HaveField("VLAN", HaveValue(Equal(int32(120)))), HaveField("Uplink", "vmbr1"), HaveField("Clusters", []string{netPVE, netHV}),
		HaveField("Subnets", []console.Subnet{{CIDR: "10.20.0.0/24", Gateway: "10.20.0.1",
			DHCP: &console.DHCPRange{RangeStart: "10.20.0.100", RangeEnd: "10.20.0.199", DNSServer: "10.20.0.1"}}}),
		HaveField("SecurityRules", []console.SecurityRule{
			{Direction: "Ingress", Action: "Allow", Protocol: "TCP", Ports: "22", Peer: "10.0.0.0/8", Comment: "ssh from the office"},
			{Direction: "Egress", Action: "Deny", Protocol: "Any", Peer: "192.168.0.0/16"}}),
		HaveField("BandwidthMbps", int32(100)), HaveField("AllowedNamespaces", []string{teamB}),
		HaveField("Phase", "Degraded"), HaveField("Ready", "False"), HaveField("Reason", "PartiallyRealized"),
		HaveField("Realizations", ConsistOf(
			console.NetworkRealization{Cluster: netPVE, Ready: true, Bridge: "hf120", SecurityGroup: "hfsg-lab"},
			console.NetworkRealization{Cluster: netHV, Reason: "Unsupported",
				Message: "securityPolicy.rules[1]: Hyper-V port ACLs cannot match a remote prefix on egress"})),
		HaveField("Addresses", HaveValue(Equal(console.AddressUsage{Total: 100, Allocated: 2, Available: 98}))),
		HaveField("ConnectedVMs", []string{teamA + "/net-vm-a", teamA + "/net-vm-b"}), HaveField("ConnectedVMCount", int32(2)))))

	status, detail := getJSON[console.NetworkDetail](t, f, tok, "/api/v1/namespaces/"+teamA+"/networks/lab-net")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(detail.Name).To(Equal("lab-net"))
	g.Expect(detail.AllocatedAddresses).To(Equal([]console.AllocatedAddress{
		{Address: "10.20.0.100", Prefix: 24, Namespace: teamA, MachineClaim: "net-vm-b", IPAddressClaim: "net-vm-b-eth0-ipv4"},
		{Address: "10.20.0.101", Prefix: 24, Namespace: teamA, MachineClaim: "net-vm-a", IPAddressClaim: "net-vm-a-eth0-ipv4"},
	}), "the addresses of this network only, in address order, each with its VM")
	g.Expect(detail.AddressesHiddenIn).To(Equal([]string{teamB}), "alice may not read the IPAddresses of team-b, which the network is shared with")

	status, storages := getJSON[console.List[console.Storage]](t, f, tok, "/api/v1/storages?namespace="+teamA)
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(storages.Items).To(ContainElement(And(HaveField("Name", "fast-zfs"), HaveField("Type", "zfspool"), HaveField("Tier", "fast"),
		HaveField("Adopt", false), HaveField("StorageName", "fast-zfs"), HaveField("Phase", "Ready"), HaveField("Ready", "True"),
		HaveField("Reason", "Realized"), HaveField("UsedBytes", 256*gib), HaveField("AvailableBytes", 768*gib),
		HaveField("Allocations", int32(1)), HaveField("AllocatedBytes", 32*gib),
		HaveField("Replication", HaveValue(Equal(console.StorageReplication{TargetNode: "pve2", Schedule: "*/15"}))),
		HaveField("Replicated", HaveValue(Equal(console.ConditionState{Status: "False", Reason: "ReplicationFailed",
			Message: "net-vm-s: last replication to pve2 failed"}))),
		HaveField("LastReplication", HaveValue(BeTemporally("~", time.Now().Add(-10*time.Minute), time.Minute))),
		HaveField("Realizations", ConsistOf(console.StorageRealization{Cluster: netPVE, Ready: true, Nodes: []console.StorageNode{
			{Node: "pve1", Active: true, TotalBytes: 1024 * gib, UsedBytes: 256 * gib, AvailableBytes: 768 * gib},
			{Node: "pve3"}}})))))

	status, sd := getJSON[console.StorageDetail](t, f, tok, "/api/v1/namespaces/"+teamA+"/storages/fast-zfs")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(sd.VMs).To(Equal([]console.StorageVM{{Namespace: teamA, Name: "net-vm-s", Node: "pve1", Bytes: 32 * gib, Phase: "Ready"}}))
	g.Expect(sd.VMsHiddenIn).To(BeEmpty())

	// vera has view in team-a only: view reads team-a's IPAddresses (HyperFleet aggregates that
	// into it), not team-b's, so she gets the network, its counts, team-a's addresses, and which
	// namespace's addresses are not listed to her.
	status, detail = getJSON[console.NetworkDetail](t, f, f.token(t, vera, fakeoidc.TokenOptions{}), "/api/v1/namespaces/"+teamA+"/networks/lab-net")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(detail.Addresses).To(HaveValue(Equal(console.AddressUsage{Total: 100, Allocated: 2, Available: 98})))
	g.Expect(detail.AllocatedAddresses).NotTo(BeEmpty())
	for _, a := range detail.AllocatedAddresses {
		g.Expect(a.Namespace).To(Equal(teamA))
	}
	g.Expect(detail.AddressesHiddenIn).To(Equal([]string{teamB}))
}

// TestNetworksAndStoragesOfAnotherNamespace plays a person of team-a, and one whose token names
// Kubernetes' admin group, after team-b's network and storage: neither is listed, a listing of
// team-b is refused, and asking for them by URL, in the API or the UI, gets word for word the
// answer a network or storage that does not exist gets, so the names that exist in team-b stay
// unknown.
func TestNetworksAndStoragesOfAnotherNamespace(t *testing.T) {
	f := startConsole(t)
	network(t, teamB, "bobs-net", 1)
	storage(t, teamB, "bobs-store")
	network(t, teamA, "alices-net", 0)

	for _, who := range []fakeoidc.User{alice, mallory} {
		t.Run(who.Username, func(t *testing.T) {
			g := NewWithT(t)
			tok := f.token(t, who, fakeoidc.TokenOptions{})
			status, networks := getJSON[console.List[console.Network]](t, f, tok, "/api/v1/networks")
			g.Expect(status).To(Equal(http.StatusOK))
			for _, n := range networks.Items {
				g.Expect(n.Namespace).NotTo(Equal(teamB))
			}
			if who.Username == "alice" {
				g.Expect(networks.Items).To(ContainElement(HaveField("Name", "alices-net")), "impersonation works: alice sees her own network")
			}
			status, storages := getJSON[console.List[console.Storage]](t, f, tok, "/api/v1/storages")
			g.Expect(status).To(Equal(http.StatusOK))
			for _, s := range storages.Items {
				g.Expect(s.Namespace).NotTo(Equal(teamB))
			}
			for _, path := range []string{"/api/v1/networks?namespace=" + teamB, "/api/v1/storages?namespace=" + teamB} {
				r := f.call(t, http.MethodGet, path, tok, nil)
				g.Expect(r.Status).To(Equal(http.StatusForbidden), path)
				g.Expect(r.problem(t).Title).To(Equal("Forbidden by Kubernetes RBAC"))
			}

			for _, tc := range []struct{ kind, theirs string }{{"networks", "bobs-net"}, {"storages", "bobs-store"}} {
				theirs := f.call(t, http.MethodGet, "/api/v1/namespaces/"+teamB+"/"+tc.kind+"/"+tc.theirs, tok, nil)
				g.Expect(theirs.Status).To(Equal(http.StatusNotFound), string(theirs.Body))
				g.Expect(string(theirs.Body)).NotTo(ContainSubstring(tc.theirs))
				for _, ns := range []string{teamB, teamA} {
					missing := "/api/v1/namespaces/" + ns + "/" + tc.kind + "/no-such"
					r := f.call(t, http.MethodGet, missing, tok, nil)
					g.Expect(r.Status).To(Equal(theirs.Status), missing)
					g.Expect(string(r.Body)).To(Equal(string(theirs.Body)), "%s of %s answers as %s", tc.theirs, teamB, missing)
				}
			}
		})
	}

	t.Run("the pages", func(t *testing.T) {
		g := NewWithT(t)
		b := newBrowser(t)
		status, page, _ := f.signIn(t, b, alice, false)
		g.Expect(status).To(Equal(http.StatusOK), page)
		for _, list := range []string{"/networks", "/storage"} {
			status, page, _ = b.get(t, f.URL+list)
			g.Expect(status).To(Equal(http.StatusOK))
			g.Expect(page).NotTo(ContainSubstring("bobs-"))
		}
		for _, pair := range [][2]string{{"/networks/" + teamB + "/bobs-net", "/networks/" + teamB + "/no-such"},
			{"/storage/" + teamB + "/bobs-store", "/storage/" + teamA + "/no-such"}} {
			st1, theirs, _ := b.get(t, f.URL+pair[0])
			st2, missing, _ := b.get(t, f.URL+pair[1])
			g.Expect(st1).To(Equal(http.StatusNotFound))
			g.Expect(st2).To(Equal(st1))
			g.Expect(theirs).To(Equal(missing), pair[0])
		}
	})
}

// TestNetworkAndStoragePages: the Networks page lists a network with its type, phase, address use
// and VMs; its page shows each cluster's realisation with its reason, the subnets, the rules and
// the address table. The Storage page lists a storage with its tier and capacity; its page shows
// each node's capacity and the VMs on it.
func TestNetworkAndStoragePages(t *testing.T) {
	g := NewWithT(t)
	f := startConsole(t)
	grantIPAMView(t, teamA, "oidc:"+alice.Email)
	n := network(t, teamA, "page-net", 2)
	networkVM(t, n, "page-vm-a", "10.20.0.100")
	storageVM(t, teamA, "page-vm-s", storage(t, teamA, "page-store"))
	b := newBrowser(t)
	status, page, _ := f.signIn(t, b, alice, false)
	g.Expect(status).To(Equal(http.StatusOK), page)
	g.Expect(page).To(And(ContainSubstring(`href="/networks"`), ContainSubstring(`href="/storage"`)), "the navigation links both")

	status, page, _ = b.get(t, f.URL+"/networks")
	g.Expect(status).To(Equal(http.StatusOK))
	row := tableRow(page, `data-network="`+teamA+`/page-net"`)
	g.Expect(row).To(And(ContainSubstring(`href="/networks/`+teamA+`/page-net"`), ContainSubstring("VLAN"), ContainSubstring("Degraded"),
		ContainSubstring(`data-free="98" data-total="100"`), ContainSubstring("2 / 100"),
		ContainSubstring(`data-field="connectedVMCount">2<`)), page)

	status, page, _ = b.get(t, f.URL+"/networks/"+teamA+"/page-net")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(tableRow(page, `data-cluster="`+netHV+`"`)).To(And(ContainSubstring("Not ready"), ContainSubstring("Unsupported"),
		ContainSubstring("Hyper-V port ACLs cannot match a remote prefix on egress")))
	g.Expect(tableRow(page, `data-cluster="`+netPVE+`"`)).To(And(ContainSubstring("Ready"), ContainSubstring("hf120")))
	g.Expect(page).To(And(ContainSubstring("10.20.0.0/24"), ContainSubstring("10.20.0.100 – 10.20.0.199"),
		ContainSubstring("ssh from the office"), ContainSubstring("100 Mbit/s")))
	g.Expect(tableRow(page, `data-address="10.20.0.100"`)).To(And(ContainSubstring("10.20.0.100/24"), ContainSubstring(">page-vm-a</a>")))

	status, page, _ = b.get(t, f.URL+"/storage")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(tableRow(page, `data-storage="`+teamA+`/page-store"`)).To(And(ContainSubstring("fast"), ContainSubstring("zfspool"),
		ContainSubstring("Ready"), ContainSubstring("256.0 GiB / 768.0 GiB"), ContainSubstring(`data-field="allocations">1<`)))

	status, page, _ = b.get(t, f.URL+"/storage/"+teamA+"/page-store")
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(tableRow(page, `data-node="pve1"`)).To(And(ContainSubstring("Active"), ContainSubstring("256.0 GiB / 1.0 TiB"),
		ContainSubstring("768.0 GiB")))
	g.Expect(tableRow(page, `data-node="pve3"`)).To(ContainSubstring("Inactive"))
	g.Expect(page).To(And(ContainSubstring("ReplicationFailed"), ContainSubstring("to pve2")))
	g.Expect(tableRow(page, `data-vm="`+teamA+`/page-vm-s"`)).To(And(ContainSubstring("pve1"), ContainSubstring("32.0 GiB")))
}

// TestBrowserNetworksPage: in Chromium, the Networks page lists a network with its address use,
// the bar drawn to the share of addresses taken; the network and storage pages are kept as
// screenshots.
func TestBrowserNetworksPage(t *testing.T) {
	g := NewWithT(t)
	ctx := newBrowserContext(t)
	f := startConsole(t)
	grantIPAMView(t, teamA, "oidc:"+alice.Email)
	networkVM(t, network(t, teamA, "browser-net", 25), "browser-vm", "10.20.0.100")
	storageVM(t, teamA, "browser-vm-s", storage(t, teamA, "browser-store"))

	g.Expect(chromedp.Do(ctx,
		chromedp.Navigate(f.URL+"/networks"),
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), alice.Username),
		chromedp.SendKeys(chromedp.ID("password"), alice.Password+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-network="`+teamA+`/browser-net"]`)),
	)).To(Succeed())
	usage, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`tr[data-network="`+teamA+`/browser-net"] [data-field="addresses"]`)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(usage).To(ContainSubstring("25 / 100"))
	bar, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`document.querySelector('tr[data-network="`+teamA+`/browser-net"] .meter i').style.width`))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bar).To(Equal("25%"))
	shots := newScreenshots(t)
	shots.take(ctx, "09-networks")
	for _, p := range []struct{ path, wait, shot string }{
		{"/networks/" + teamA + "/browser-net", "#realizations", "10-network"},
		{"/storage", "#storages", "11-storage"},
		{"/storage/" + teamA + "/browser-store", "table.nodes", "12-storage-nodes"},
	} {
		g.Expect(chromedp.Do(ctx, chromedp.Navigate(f.URL+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))).To(Succeed(), p.path)
		shots.take(ctx, p.shot)
	}
}
