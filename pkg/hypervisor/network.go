package hypervisor

import (
	"context"
	"net/netip"
)

// NetworkKind is how a VirtualNetwork is carried.
type NetworkKind string

const (
	// NetworkIsolated is a segment of its own with no uplink (Proxmox SDN simple zone, Hyper-V
	// internal switch, vSphere port group on a standard switch without uplinks).
	NetworkIsolated NetworkKind = "Isolated"
	// NetworkVLAN is a VLAN on an existing uplink (a Proxmox bridge, a Hyper-V external switch, a
	// vSphere switch).
	NetworkVLAN NetworkKind = "VLAN"
	// NetworkVXLAN is an overlay between the hosts (Proxmox SDN VXLAN zone).
	NetworkVXLAN NetworkKind = "VXLAN"
)

// VirtualNetwork is a network HyperFleet defines on a hypervisor cluster for one VMNetwork. The
// provider derives every name it creates from ID, and marks what it creates with Owner so that it
// changes and deletes only its own objects.
type VirtualNetwork struct {
	// ID identifies the network among this HypervisorCluster's networks: short, lower-case
	// letters and digits, starting with a letter (Proxmox SDN IDs have at most 8 characters, so
	// HyperFleet derives it from the VMNetwork and keeps it in status).
	ID string
	// Title names the VMNetwork (namespace/name) for people reading the hypervisor's own UI.
	Title string
	// Owner marks what the provider creates; only the installation and cluster in it matter.
	Owner Ownership
	Kind  NetworkKind
	// Uplink is the existing bridge or switch a VLAN rides on; empty for the provider's default.
	Uplink string
	// VLAN is the tag of a VLAN network; VNI the VXLAN network identifier.
	VLAN int
	VNI  int
	// Peers are the VXLAN tunnel endpoints (the hosts' addresses).
	Peers []netip.Addr
	// MTU of the network; 0 for the provider's default.
	MTU     int
	Subnets []Subnet
	// Rules are the security policy, in order; the first rule matching a packet decides. They
	// apply to every VM NIC on the network. No rules means no filtering.
	Rules []FirewallRule
}

// Subnet is an IP subnet of a VirtualNetwork.
type Subnet struct {
	CIDR    netip.Prefix
	Gateway netip.Addr
	// DHCPStart and DHCPEnd bound the addresses the hypervisor's DHCP server (and HyperFleet's
	// IPAM) hands out; both zero for no DHCP.
	DHCPStart, DHCPEnd netip.Addr
	// DNSServer is the resolver DHCP announces; zero for none.
	DNSServer netip.Addr
	// SNAT masquerades the subnet's traffic leaving through the host.
	SNAT bool
}

// FirewallRule is one rule of a network's security policy.
type FirewallRule struct {
	// Direction is "in" (to the VM) or "out" (from the VM).
	Direction string
	// Action is "ACCEPT", "DROP" or "REJECT".
	Action string
	// Protocol is "tcp", "udp", "icmp" or empty for any.
	Protocol string
	// Ports is a destination port list such as "22" or "80,443,8000:8080"; empty for any.
	Ports string
	// Peer is the remote side: an address or prefix ("10.0.0.0/8"); empty for any.
	Peer string
	// Comment says why the rule exists.
	Comment string
}

// NetworkGap is a feature of a VirtualNetwork that a provider cannot give.
type NetworkGap struct {
	// Field is the VMNetwork field the gap concerns (spec.type, spec.qos.priority, ...).
	Field string
	// Reason says what the hypervisor lacks, for the VMNetwork's status.
	Reason string
}

// NetworkRealization is what a network became on the hypervisor.
type NetworkRealization struct {
	// Bridge is what a VM NIC names to attach to the network (NIC.Bridge): a Proxmox VNet, a
	// Hyper-V switch, a vSphere port group.
	Bridge string
	// VLAN is the tag a NIC must carry itself to join the network (a VLAN on a Hyper-V switch);
	// 0 when the hypervisor tags for it (a Proxmox VLAN zone's VNet).
	VLAN int
	// SecurityGroup is the hypervisor's name of the security policy that NICs on the network
	// are bound to (a Proxmox firewall security group); empty without rules or when the
	// provider applies Rules to each NIC itself (Hyper-V port ACLs).
	SecurityGroup string
}

// Networker is a provider that can define networks on the hypervisor cluster (Proxmox SDN and
// firewall security groups, Hyper-V virtual switches and port ACLs, vSphere port groups). It is
// optional: a provider without it refuses VMNetworks with a reason.
type Networker interface {
	// NetworkGaps lists the features of n the provider cannot give, without a call to the
	// hypervisor. A network with gaps is not realised: each gap is reported with its reason.
	NetworkGaps(n VirtualNetwork) []NetworkGap
	// EnsureNetwork creates or updates the network so the hypervisor matches n, and applies the
	// change (Proxmox's SDN reload) when anything changed. An existing object of the same name
	// that does not carry n.Owner's mark is never changed: ErrNotOwned.
	EnsureNetwork(ctx context.Context, n VirtualNetwork) (NetworkRealization, error)
	// DeleteNetwork removes everything EnsureNetwork created for the network with this ID and
	// owner; nothing left is not an error. Objects without the owner's mark stay: ErrNotOwned.
	DeleteNetwork(ctx context.Context, id string, owner Ownership) error
	// ReserveAddress records in the hypervisor's own IPAM, where it has one, that ip belongs to
	// the NIC with mac on the network, so its DHCP server hands that NIC that address. A
	// provider without IPAM returns nil: the address reaches the guest through cloud-init only.
	ReserveAddress(ctx context.Context, id string, owner Ownership, ip netip.Addr, mac string) error
	// ReleaseAddress undoes ReserveAddress; an address not reserved is not an error.
	ReleaseAddress(ctx context.Context, id string, owner Ownership, ip netip.Addr, mac string) error
}

// NICPolicy is what a NIC on a VirtualNetwork gets besides its bridge: it is how a network's
// security policy and QoS reach each VM.
type NICPolicy struct {
	// SecurityGroup binds the NIC to a firewall security group (NetworkRealization.SecurityGroup).
	SecurityGroup string
	// Rules are applied to the NIC itself (Hyper-V port ACLs) when the provider binds no group.
	Rules []FirewallRule
	// RateMbps caps the NIC's bandwidth in megabits per second; 0 for no cap.
	RateMbps int
}
