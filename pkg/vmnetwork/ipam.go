package vmnetwork

import (
	"fmt"
	"net/netip"

	hfv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

// Range is the part of a network HyperFleet's IPAM hands out: the DHCP range of the first IPv4
// subnet that has one.
type Range struct {
	Prefix     netip.Prefix
	Gateway    netip.Addr
	Start, End netip.Addr
	DNSServer  netip.Addr
}

// IPAMRange finds the network's IPAM range; ok is false when no IPv4 subnet has a DHCP range.
func IPAMRange(n *hfv1.VMNetwork) (Range, bool, error) {
	for i, s := range n.Spec.Subnets {
		if s.DHCP == nil {
			continue
		}
		sub, err := subnet(s)
		if err != nil {
			return Range{}, false, fmt.Errorf("spec.subnets[%d]: %w", i, err)
		}
		if !sub.CIDR.Addr().Is4() {
			continue
		}
		return Range{Prefix: sub.CIDR, Gateway: sub.Gateway, Start: sub.DHCPStart, End: sub.DHCPEnd, DNSServer: sub.DNSServer}, true, nil
	}
	return Range{}, false, nil
}

// Size counts the range's addresses (at most the int32 a status holds).
func (r Range) Size() int32 {
	if !r.Start.Is4() || !r.End.Is4() {
		return 0
	}
	s, e := r.Start.As4(), r.End.As4()
	n := (uint32(e[0])<<24 | uint32(e[1])<<16 | uint32(e[2])<<8 | uint32(e[3])) -
		(uint32(s[0])<<24 | uint32(s[1])<<16 | uint32(s[2])<<8 | uint32(s[3])) + 1
	if n > 1<<31-1 {
		return 1<<31 - 1
	}
	return int32(n)
}

// NextFree is the lowest address of the range that is not in use and is neither the gateway nor
// the subnet's network or broadcast address; ok is false when the range is exhausted.
func (r Range) NextFree(used map[netip.Addr]bool) (netip.Addr, bool) {
	last := r.Prefix.Masked().Addr()
	for a := r.Start; r.Prefix.Contains(a) && !r.End.Less(a); a = a.Next() {
		if used[a] || a == r.Gateway || a == last {
			continue
		}
		if next := a.Next(); !r.Prefix.Contains(next) {
			continue // the broadcast address
		}
		return a, true
	}
	return netip.Addr{}, false
}
