package console

import (
	"context"
	"net/http"
	"net/netip"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/vmnetwork"
)

// Network is one VMNetwork as a person sees it.
type Network struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Type is Isolated, VLAN or VXLAN.
	Type     string   `json:"type"`
	VLAN     *int32   `json:"vlan,omitempty"`
	VNI      *int32   `json:"vni,omitempty"`
	Uplink   string   `json:"uplink,omitempty"`
	MTU      *int32   `json:"mtu,omitempty"`
	Clusters []string `json:"clusters"`
	Subnets  []Subnet `json:"subnets,omitempty"`
	// SecurityRules are the security policy's rules in order; none means no filtering.
	SecurityRules []SecurityRule `json:"securityRules,omitempty"`
	// BandwidthMbps is the QoS cap of each VM NIC, 0 for none.
	BandwidthMbps     int32    `json:"bandwidthMbps,omitempty"`
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
	Phase             string   `json:"phase,omitempty"`
	// Ready, Reason and Message are the Ready condition's (Ready is Unknown until it is set).
	Ready        string               `json:"ready"`
	Reason       string               `json:"reason,omitempty"`
	Message      string               `json:"message,omitempty"`
	Realizations []NetworkRealization `json:"realizations,omitempty"`
	// Addresses counts the IPAM range: absent while the network has no DHCP range.
	Addresses *AddressUsage `json:"addresses,omitempty"`
	// ConnectedVMs are the first 100 MachineClaims (namespace/name) with a NIC on the network;
	// ConnectedVMCount counts them all.
	ConnectedVMs     []string  `json:"connectedVMs,omitempty"`
	ConnectedVMCount int32     `json:"connectedVMCount"`
	Deleting         bool      `json:"deleting,omitempty"`
	Created          time.Time `json:"created"`
}

// Subnet is one IP subnet of a network.
type Subnet struct {
	CIDR    string `json:"cidr"`
	Gateway string `json:"gateway,omitempty"`
	// DHCP is the range handed out, which is also HyperFleet's IPAM range.
	DHCP *DHCPRange `json:"dhcp,omitempty"`
	SNAT bool       `json:"snat,omitempty"`
}

// DHCPRange is a subnet's DHCP range and resolver.
type DHCPRange struct {
	RangeStart string `json:"rangeStart"`
	RangeEnd   string `json:"rangeEnd"`
	DNSServer  string `json:"dnsServer,omitempty"`
}

// SecurityRule is one rule of a network's security policy.
type SecurityRule struct {
	Direction string `json:"direction"`
	Action    string `json:"action"`
	Protocol  string `json:"protocol"`
	Ports     string `json:"ports,omitempty"`
	Peer      string `json:"peer,omitempty"`
	Comment   string `json:"comment,omitempty"`
}

// NetworkRealization is the network on one HypervisorCluster, with why it is not ready.
type NetworkRealization struct {
	Cluster       string `json:"cluster"`
	Ready         bool   `json:"ready"`
	Bridge        string `json:"bridge,omitempty"`
	VLAN          *int32 `json:"vlan,omitempty"`
	SecurityGroup string `json:"securityGroup,omitempty"`
	Reason        string `json:"reason,omitempty"`
	Message       string `json:"message,omitempty"`
}

// AddressUsage counts a network's IPAM range.
type AddressUsage struct {
	Total     int32 `json:"total"`
	Allocated int32 `json:"allocated"`
	Available int32 `json:"available"`
}

// NetworkDetail is a network with the addresses allocated from it.
type NetworkDetail struct {
	Network
	// AllocatedAddresses are the IPAddresses HyperFleet allocated from the network that the
	// caller may read, by address.
	AllocatedAddresses []AllocatedAddress `json:"allocatedAddresses"`
	// AddressesHiddenIn are the namespaces using the network whose IPAddresses the caller may
	// not read: their addresses are counted in addresses but not listed.
	AddressesHiddenIn []string `json:"addressesHiddenIn,omitempty"`
}

// AllocatedAddress is one address of a network and the VM holding it.
type AllocatedAddress struct {
	Address string `json:"address"`
	Prefix  int32  `json:"prefix,omitempty"`
	// Namespace is the VM's (and its IPAddress's).
	Namespace string `json:"namespace"`
	// MachineClaim is the VM holding the address, empty when the caller may not read the
	// IPAddressClaim that names it.
	MachineClaim   string `json:"machineClaim,omitempty"`
	IPAddressClaim string `json:"ipAddressClaim"`
}

func networkOf(n *fleetv1.VMNetwork) Network {
	out := Network{Namespace: n.Namespace, Name: n.Name, Type: string(n.Spec.Type), VLAN: n.Spec.VLAN, VNI: n.Spec.VNI,
		Uplink: n.Spec.Uplink, MTU: n.Spec.MTU, AllowedNamespaces: n.Spec.AllowedNamespaces, Phase: string(n.Status.Phase),
		Ready: "Unknown", ConnectedVMs: n.Status.ConnectedVMs, ConnectedVMCount: n.Status.ConnectedVMCount,
		Deleting: !n.DeletionTimestamp.IsZero(), Created: n.CreationTimestamp.Time, Clusters: []string{}}
	if out.Type == "" {
		out.Type = string(fleetv1.IsolatedNetwork)
	}
	for _, c := range n.Spec.Clusters {
		out.Clusters = append(out.Clusters, c.Name)
	}
	for _, s := range n.Spec.Subnets {
		sub := Subnet{CIDR: s.CIDR, Gateway: s.Gateway, SNAT: s.SNAT}
		if d := s.DHCP; d != nil {
			sub.DHCP = &DHCPRange{RangeStart: d.RangeStart, RangeEnd: d.RangeEnd, DNSServer: d.DNSServer}
		}
		out.Subnets = append(out.Subnets, sub)
	}
	if p := n.Spec.SecurityPolicy; p != nil {
		for _, r := range p.Rules {
			protocol := string(r.Protocol)
			if protocol == "" {
				protocol = "Any" // the CRD's default
			}
			out.SecurityRules = append(out.SecurityRules, SecurityRule{Direction: string(r.Direction), Action: string(r.Action),
				Protocol: protocol, Ports: r.Ports, Peer: r.Peer, Comment: r.Comment})
		}
	}
	if n.Spec.QoS != nil {
		out.BandwidthMbps = n.Spec.QoS.BandwidthMbps
	}
	if c := meta.FindStatusCondition(n.Status.Conditions, fleetv1.ReadyCondition); c != nil {
		out.Ready, out.Reason, out.Message = string(c.Status), c.Reason, c.Message
	}
	for _, r := range n.Status.Realizations {
		out.Realizations = append(out.Realizations, NetworkRealization{Cluster: r.Cluster, Ready: r.Ready, Bridge: r.Bridge,
			VLAN: r.VLAN, SecurityGroup: r.SecurityGroup, Reason: r.Reason, Message: r.Message})
	}
	if a := n.Status.Addresses; a != nil {
		out.Addresses = &AddressUsage{Total: a.Total, Allocated: a.Allocated, Available: a.Available}
	}
	return out
}

// listNetworks lists the VMNetworks c may see.
func (s *Server) listNetworks(ctx context.Context, c client.Client, namespace string) ([]Network, error) {
	var out []Network
	err := listVisible(ctx, c, s.inventory.Namespaces(), namespace, func() *fleetv1.VMNetworkList { return &fleetv1.VMNetworkList{} },
		func(l *fleetv1.VMNetworkList) {
			for i := range l.Items {
				out = append(out, networkOf(&l.Items[i]))
			}
		})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, err
}

// getNetwork reads one VMNetwork and its allocated addresses as c. The addresses live in the
// namespaces of the VMs holding them: the network's own and those it is shared with, each read
// only where c may.
func getNetwork(ctx context.Context, c client.Client, namespace, name string) (NetworkDetail, error) {
	n := &fleetv1.VMNetwork{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, n); err != nil {
		return NetworkDetail{}, err
	}
	d := NetworkDetail{Network: networkOf(n), AllocatedAddresses: []AllocatedAddress{}}
	key := vmnetwork.Key(n.Namespace, n.Name)
	for _, ns := range usingNamespaces(n.Namespace, n.Spec.AllowedNamespaces) {
		var addrs ipamv1.IPAddressList
		err := c.List(ctx, &addrs, client.InNamespace(ns), client.MatchingLabels{fleetv1.VMNetworkNameLabel: key})
		if apierrors.IsForbidden(err) {
			d.AddressesHiddenIn = append(d.AddressesHiddenIn, ns)
			continue
		}
		if err != nil {
			return NetworkDetail{}, err
		}
		if len(addrs.Items) == 0 {
			continue
		}
		owners, err := ipClaimOwners(ctx, c, ns)
		if err != nil {
			return NetworkDetail{}, err
		}
		for _, a := range addrs.Items {
			row := AllocatedAddress{Address: a.Spec.Address, Namespace: a.Namespace, IPAddressClaim: a.Spec.ClaimRef.Name,
				MachineClaim: owners[a.Spec.ClaimRef.Name]}
			if a.Spec.Prefix != nil {
				row.Prefix = *a.Spec.Prefix
			}
			d.AllocatedAddresses = append(d.AllocatedAddresses, row)
		}
	}
	sort.Slice(d.AllocatedAddresses, func(i, j int) bool {
		return addressLess(d.AllocatedAddresses[i].Address, d.AllocatedAddresses[j].Address)
	})
	return d, nil
}

// ipClaimOwners maps the IPAddressClaims of namespace to the MachineClaims they were made for
// (their controller), as far as c may read them: a refusal leaves the map empty.
func ipClaimOwners(ctx context.Context, c client.Client, namespace string) (map[string]string, error) {
	owners := map[string]string{}
	var claims ipamv1.IPAddressClaimList
	err := c.List(ctx, &claims, client.InNamespace(namespace))
	if apierrors.IsForbidden(err) {
		return owners, nil
	}
	if err != nil {
		return nil, err
	}
	for _, ic := range claims.Items {
		for _, o := range ic.OwnerReferences {
			if o.Kind == "MachineClaim" && o.Controller != nil && *o.Controller {
				owners[ic.Name] = o.Name
			}
		}
	}
	return owners, nil
}

// usingNamespaces are a network's or storage's own namespace and those it is shared with,
// without repeats.
func usingNamespaces(own string, allowed []string) []string {
	out := []string{own}
	for _, ns := range allowed {
		if ns != own {
			out = append(out, ns)
		}
	}
	return out
}

// addressLess orders addresses numerically, anything unparsable last.
func addressLess(a, b string) bool {
	pa, errA := netip.ParseAddr(a)
	pb, errB := netip.ParseAddr(b)
	switch {
	case errA != nil || errB != nil:
		return errA == nil || (errB != nil && a < b)
	default:
		return pa.Less(pb)
	}
}

func (s *Server) getNetworks(w http.ResponseWriter, r *http.Request, c *caller) {
	networks, err := s.listNetworks(r.Context(), c.Client, r.URL.Query().Get("namespace"))
	if err != nil {
		writeKubeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, List[Network]{Items: nonNilSlice(networks)})
}

func (s *Server) getNetworkDetail(w http.ResponseWriter, r *http.Request, c *caller) {
	d, err := getNetwork(r.Context(), c.Client, r.PathValue("namespace"), r.PathValue("name"))
	if err != nil {
		writeHiddenError(w, r, "VMNetwork", err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// writeHiddenError answers a failed read of one object: one the caller may not read is
// answered as one that does not exist, word for word, so a person of another namespace learns
// nothing of which names exist there.
func writeHiddenError(w http.ResponseWriter, r *http.Request, kind string, err error) {
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		writeProblem(w, r, http.StatusNotFound, "Not found", hiddenDetail(kind), nil)
		return
	}
	writeKubeError(w, r, err)
}

// hiddenDetail is the one answer for a missing object and one the caller may not read.
func hiddenDetail(kind string) string {
	return "no such " + kind + ", or not one you may read"
}
