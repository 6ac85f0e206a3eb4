package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VMNetworkFinalizer keeps a VMNetwork until no VM uses it and its hypervisor objects are gone.
const VMNetworkFinalizer = "vmnetwork.hyperfleet.io"

// VMNetworkNameLabel is set on every IPAddress HyperFleet allocates from a VMNetwork, to
// "<namespace>.<name>" of the network.
const VMNetworkNameLabel = "hyperfleet.io/vm-network"

// VMNetworkNamespaceAnnotation is set on an IPAddressClaim for a VMNetwork of another namespace:
// the network's namespace. The claim's poolRef names the network; without the annotation the
// network is in the IPAddressClaim's own namespace.
const VMNetworkNamespaceAnnotation = "hyperfleet.io/vm-network-namespace"

// VMNetworkType is how a network is carried between the hosts.
// +kubebuilder:validation:Enum=Isolated;VLAN;VXLAN
type VMNetworkType string

const (
	// IsolatedNetwork is a segment of its own with no uplink: a Proxmox SDN simple zone (one per
	// host, routed and NATed by the host), a Hyper-V internal switch.
	IsolatedNetwork VMNetworkType = "Isolated"
	// VLANNetwork is a VLAN on an existing bridge or switch (spec.uplink).
	VLANNetwork VMNetworkType = "VLAN"
	// VXLANNetwork is an overlay between the hosts (a Proxmox SDN VXLAN zone).
	VXLANNetwork VMNetworkType = "VXLAN"
)

// VMNetworkDHCP is a subnet's DHCP service. HyperFleet's VMs take their addresses from the same
// range through HyperFleet's IPAM, reserved for their MAC in the hypervisor's IPAM where it has
// one, and get them statically through cloud-init too. A range whose start is after its end, or
// that holds the gateway, is refused in the network's Ready condition (reason InvalidSubnet).
// +kubebuilder:validation:XValidation:rule="ip(self.rangeStart).family() == ip(self.rangeEnd).family()",message="rangeStart and rangeEnd must be of the same address family"
type VMNetworkDHCP struct {
	// rangeStart is the first address handed out.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="rangeStart must be an IP address"
	RangeStart string `json:"rangeStart"`

	// rangeEnd is the last address handed out.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="rangeEnd must be an IP address"
	RangeEnd string `json:"rangeEnd"`

	// dnsServer is the resolver announced to the VMs (and written in their network-config).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="dnsServer must be an IP address"
	DNSServer string `json:"dnsServer,omitempty"`
}

// VMNetworkSubnet is an IP subnet of the network.
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || cidr(self.cidr).containsIP(self.gateway)",message="gateway must be inside cidr"
// +kubebuilder:validation:XValidation:rule="!has(self.dhcp) || (cidr(self.cidr).containsIP(self.dhcp.rangeStart) && cidr(self.cidr).containsIP(self.dhcp.rangeEnd))",message="the DHCP range must be inside cidr"
type VMNetworkSubnet struct {
	// cidr of the subnet, as 10.20.0.0/24. It cannot change.
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isCIDR(self) && cidr(self) == cidr(self).masked()",message="cidr must be a network prefix with no host bits set, such as 10.20.0.0/24"
	CIDR string `json:"cidr"`

	// gateway of the subnet: the host's address on an Isolated network, the router's otherwise.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="gateway must be an IP address"
	Gateway string `json:"gateway,omitempty"`

	// dhcp hands out addresses of a range; HyperFleet's VMs on the network take theirs from it.
	// +optional
	DHCP *VMNetworkDHCP `json:"dhcp,omitempty"`

	// snat masquerades the subnet's traffic leaving through the host (Isolated networks).
	// +optional
	SNAT bool `json:"snat,omitempty"`
}

// SecurityRuleDirection is the direction of traffic a rule matches, seen from the VM.
// +kubebuilder:validation:Enum=Ingress;Egress
type SecurityRuleDirection string

// SecurityRuleAction is what a matching rule does with a packet.
// +kubebuilder:validation:Enum=Allow;Deny;Reject
type SecurityRuleAction string

// SecurityRuleProtocol is the protocol a rule matches.
// +kubebuilder:validation:Enum=TCP;UDP;ICMP;Any
type SecurityRuleProtocol string

// SecurityRule is one rule of a network's security policy.
// +kubebuilder:validation:XValidation:rule="!has(self.ports) || (has(self.protocol) && (self.protocol == 'TCP' || self.protocol == 'UDP'))",message="ports need protocol TCP or UDP"
type SecurityRule struct {
	// direction is Ingress (to the VM) or Egress (from the VM).
	Direction SecurityRuleDirection `json:"direction"`

	// action is Allow, Deny (drop silently) or Reject (answer with an error; Proxmox VE only).
	Action SecurityRuleAction `json:"action"`

	// protocol is TCP, UDP, ICMP or Any (the default).
	// +optional
	// +kubebuilder:default=Any
	Protocol SecurityRuleProtocol `json:"protocol,omitempty"`

	// ports the rule matches on the VM's side for Ingress and the remote side for Egress: a
	// comma-separated list of ports and ranges such as "22" or "80,443,8000-8080".
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[0-9]{1,5}(-[0-9]{1,5})?(,[0-9]{1,5}(-[0-9]{1,5})?)*$`
	Ports string `json:"ports,omitempty"`

	// peer is the remote address or prefix (the source of Ingress, the destination of Egress);
	// unset matches any.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isIP(self) || isCIDR(self)",message="peer must be an IP address or a prefix such as 10.0.0.0/8"
	Peer string `json:"peer,omitempty"`

	// comment says why the rule exists.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9 .,:;_()/+-]*$`
	Comment string `json:"comment,omitempty"`
}

// VMNetworkSecurityPolicy filters the traffic of every VM NIC on the network. With rules, the
// first rule matching a packet decides; incoming traffic no rule allows is dropped and outgoing
// traffic no rule denies is let through, on every hypervisor.
type VMNetworkSecurityPolicy struct {
	// rules in order.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Rules []SecurityRule `json:"rules"`
}

// VMNetworkQoS shapes the traffic of each VM NIC on the network.
type VMNetworkQoS struct {
	// bandwidthMbps caps each VM NIC at this many megabits per second (Proxmox's NIC rate,
	// Hyper-V's MaximumBandwidth, vSphere's traffic shaping).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=400000
	BandwidthMbps int32 `json:"bandwidthMbps"`
}

// VMNetworkSpec is the desired network.
// +kubebuilder:validation:XValidation:rule="(has(self.type) && self.type == 'VLAN') == has(self.vlan)",message="vlan is set for, and only for, a VLAN network"
// +kubebuilder:validation:XValidation:rule="(has(self.type) && self.type == 'VXLAN') == has(self.vni)",message="vni is set for, and only for, a VXLAN network"
// +kubebuilder:validation:XValidation:rule="!has(self.peers) || (has(self.type) && self.type == 'VXLAN')",message="peers apply only to a VXLAN network"
// +kubebuilder:validation:XValidation:rule="!has(self.uplink) || (has(self.type) && self.type == 'VLAN')",message="uplink applies only to a VLAN network: an Isolated network has none and a VXLAN network runs between its peers"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.subnets) || (has(self.subnets) && self.subnets.size() == oldSelf.subnets.size() && self.subnets.all(s, oldSelf.subnets.exists(o, o.cidr == s.cidr)))",message="subnets' cidrs cannot change once set: VMs hold addresses in them; create a new network instead"
// +kubebuilder:validation:XValidation:rule="(has(self.type) ? self.type : 'Isolated') == (has(oldSelf.type) ? oldSelf.type : 'Isolated')",message="type cannot change: create a new network instead"
type VMNetworkSpec struct {
	// clusters are the HypervisorClusters of this namespace the network is defined on.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Clusters []LocalObjectReference `json:"clusters"`

	// type is Isolated (default), VLAN or VXLAN.
	// +optional
	// +kubebuilder:default=Isolated
	Type VMNetworkType `json:"type,omitempty"`

	// uplink is the existing bridge (Proxmox) or virtual switch (Hyper-V) a VLAN network rides on;
	// Proxmox defaults to vmbr0, Hyper-V needs it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_.\-]*$`
	Uplink string `json:"uplink,omitempty"`

	// vlan tag of a VLAN network.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4094
	VLAN *int32 `json:"vlan,omitempty"`

	// vni of a VXLAN network.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16777215
	VNI *int32 `json:"vni,omitempty"`

	// peers are the VXLAN tunnel endpoints: the hosts' addresses.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.all(p, isIP(p))",message="peers must be IP addresses"
	Peers []string `json:"peers,omitempty"`

	// mtu of the network; unset takes the hypervisor's default.
	// +optional
	// +kubebuilder:validation:Minimum=576
	// +kubebuilder:validation:Maximum=9216
	MTU *int32 `json:"mtu,omitempty"`

	// subnets of the network. HyperFleet's VMs take their IPv4 address from the first subnet with
	// a DHCP range.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	Subnets []VMNetworkSubnet `json:"subnets,omitempty"`

	// securityPolicy filters every VM NIC on the network.
	// +optional
	SecurityPolicy *VMNetworkSecurityPolicy `json:"securityPolicy,omitempty"`

	// qos shapes every VM NIC on the network.
	// +optional
	QoS *VMNetworkQoS `json:"qos,omitempty"`

	// allowedNamespaces may attach VMs to this network, besides its own namespace. A namespace's
	// users can create VMNetworks only where an administrator lets them, and a network is on its
	// own namespace's HypervisorClusters: listing a namespace here is that administrator's
	// consent to share it. A VM of a listed namespace joins it through its own HypervisorCluster
	// when that points at the same hypervisor endpoint.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
}

// VMNetworkRealization is what the network became on one HypervisorCluster.
type VMNetworkRealization struct {
	// cluster is the HypervisorCluster's name.
	Cluster string `json:"cluster"`

	// ready is true once the hypervisor holds the network as spec says.
	Ready bool `json:"ready"`

	// bridge is what VM NICs attach to: a Proxmox VNet, a Hyper-V switch, a vSphere port group.
	// +optional
	Bridge string `json:"bridge,omitempty"`

	// vlan is the tag NICs carry themselves (a VLAN on a Hyper-V switch); unset when the
	// hypervisor tags for them.
	// +optional
	VLAN *int32 `json:"vlan,omitempty"`

	// securityGroup is the hypervisor's security group NICs are bound to (Proxmox).
	// +optional
	SecurityGroup string `json:"securityGroup,omitempty"`

	// endpoint of the HypervisorCluster's hypervisor, so VMs of other namespaces find the
	// realisation on the same hypervisor.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`

	// reason is why the network is not ready, in one CamelCase word (Unsupported, NotOwned, ...).
	// +optional
	Reason string `json:"reason,omitempty"`

	// message says it for people: which feature has no equivalent on this hypervisor, and why.
	// +optional
	Message string `json:"message,omitempty"`
}

// VMNetworkAddresses counts the addresses of the network's IPAM range.
type VMNetworkAddresses struct {
	// size of the range.
	Total int32 `json:"total"`
	// allocated to VMs.
	Allocated int32 `json:"allocated"`
	// available for new VMs.
	Available int32 `json:"available"`
}

// VMNetworkPhase sums up a VMNetwork.
// +kubebuilder:validation:Enum=Pending;Ready;Degraded;Deleting
type VMNetworkPhase string

const (
	VMNetworkPending  VMNetworkPhase = "Pending"
	VMNetworkReady    VMNetworkPhase = "Ready"
	VMNetworkDegraded VMNetworkPhase = "Degraded"
	VMNetworkDeleting VMNetworkPhase = "Deleting"
)

// VMNetworkStatus is the observed network.
type VMNetworkStatus struct {
	// conditions: Ready (every realisation ready), and while deleting InUse.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase sums the network up: Pending, Ready, Degraded (ready on some clusters only), Deleting.
	// +optional
	Phase VMNetworkPhase `json:"phase,omitempty"`

	// networkID is the short identifier every hypervisor object of the network is named from.
	// +optional
	NetworkID string `json:"networkID,omitempty"`

	// realizations per HypervisorCluster.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	Realizations []VMNetworkRealization `json:"realizations,omitempty"`

	// addresses of the IPAM range.
	// +optional
	Addresses *VMNetworkAddresses `json:"addresses,omitempty"`

	// connectedVMs are the MachineClaims (namespace/name) with a NIC on the network, sorted; at
	// most 100 are listed, connectedVMCount counts them all.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	ConnectedVMs []string `json:"connectedVMs,omitempty"`

	// connectedVMCount counts the MachineClaims with a NIC on the network.
	// +optional
	ConnectedVMCount int32 `json:"connectedVMCount,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=vmnetworks,scope=Namespaced,categories=hyperfleet,shortName=vmnet
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".spec.type"
// +kubebuilder:printcolumn:name="Phase",type="string",JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Allocated",type="integer",JSONPath=".status.addresses.allocated"
// +kubebuilder:printcolumn:name="Available",type="integer",JSONPath=".status.addresses.available"
// +kubebuilder:printcolumn:name="VMs",type="integer",JSONPath=".status.connectedVMCount"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// VMNetwork is a network HyperFleet defines on hypervisor clusters (Proxmox SDN with its IPAM,
// DHCP and firewall; Hyper-V switches with port ACLs; vSphere port groups), that VMs' NICs
// attach to by name and take their addresses from.
type VMNetwork struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VMNetworkSpec   `json:"spec,omitempty"`
	Status VMNetworkStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// VMNetworkList is a list of VMNetworks.
type VMNetworkList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VMNetwork `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VMNetwork{}, &VMNetworkList{})
}

// GetConditions returns the network's conditions.
func (n *VMNetwork) GetConditions() []metav1.Condition { return n.Status.Conditions }

// SetConditions sets the network's conditions.
func (n *VMNetwork) SetConditions(c []metav1.Condition) { n.Status.Conditions = c }
