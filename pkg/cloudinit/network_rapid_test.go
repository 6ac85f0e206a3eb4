package cloudinit

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"pgregory.net/rapid"
)

// genAddr draws an address of one family, any bits.
func genAddr(rt *rapid.T, label string, v4 bool) netip.Addr {
	if v4 {
		return netip.AddrFrom4([4]byte(rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(rt, label)))
	}
	return netip.AddrFrom16([16]byte(rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(rt, label)))
}

// spell writes an address as a person might: canonical, or (IPv6) expanded in upper case.
func spell(rt *rapid.T, label string, a netip.Addr) string {
	if a.Is6() && rapid.Bool().Draw(rt, label) {
		return strings.ToUpper(a.StringExpanded())
	}
	return a.String()
}

// wantNIC is a generated interface with the addresses it was given, parsed.
type wantNIC struct {
	in       Interface
	prefixes []netip.Prefix
	gateways []netip.Addr
	hasIPv4  bool
}

// Names a guest may give an interface, some of which YAML 1.1 (cloud-init's parser) reads as
// booleans, nulls or numbers unless quoted.
var nicNames = []string{"eth0", "ens18", "lan", "storage", "no", "on", "y", "null", "1", "0x1f", "1e3", "net.100", "bond_0"}

func genNICs(rt *rapid.T) []wantNIC {
	names := rapid.SliceOfNDistinct(rapid.SampledFrom(nicNames), 1, 4, rapid.ID[string]).Draw(rt, "names")
	nics := make([]wantNIC, 0, len(names))
	for i, name := range names {
		label := func(s string) string { return fmt.Sprintf("%s%d", s, i) }
		mac := rapid.SliceOfN(rapid.Byte(), 6, 6).Draw(rt, label("mac"))
		macText := fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5])
		if rapid.Bool().Draw(rt, label("macUpper")) {
			macText = strings.ToUpper(macText)
		}
		w := wantNIC{in: Interface{Name: name, MAC: macText, MTU: rapid.SampledFrom([]int{0, 1280, 1500, 9000}).Draw(rt, label("mtu"))}}
		for _, v4 := range []bool{true, false} {
			fam := label(map[bool]string{true: "v4", false: "v6"}[v4])
			if !rapid.Bool().Draw(rt, fam) {
				continue
			}
			addr := genAddr(rt, fam+"addr", v4)
			p := netip.PrefixFrom(addr, rapid.IntRange(0, addr.BitLen()).Draw(rt, fam+"bits"))
			w.prefixes = append(w.prefixes, p)
			w.in.Addresses = append(w.in.Addresses, spell(rt, fam+"spell", addr)+fmt.Sprintf("/%d", p.Bits()))
			w.hasIPv4 = w.hasIPv4 || v4
			if rapid.Bool().Draw(rt, fam+"gw") {
				gw := genAddr(rt, fam+"gwaddr", v4)
				w.gateways = append(w.gateways, gw)
				w.in.Gateways = append(w.in.Gateways, spell(rt, fam+"gwspell", gw))
			}
		}
		nics = append(nics, w)
	}
	return nics
}

func genDNS(rt *rapid.T) (DNS, []netip.Addr) {
	var dns DNS
	var want []netip.Addr
	for i := range rapid.IntRange(0, 3).Draw(rt, "nameservers") {
		a := genAddr(rt, fmt.Sprint("ns", i), rapid.Bool().Draw(rt, fmt.Sprint("nsv4", i)))
		want = append(want, a)
		dns.Nameservers = append(dns.Nameservers, spell(rt, fmt.Sprint("nsspell", i), a))
	}
	dns.SearchDomains = rapid.SliceOfN(rapid.SampledFrom([]string{"example.org", "corp.example", "no", "lab"}), 0, 2).Draw(rt, "search")
	return dns, want
}

// yaml11NonString matches plain scalars YAML 1.1 (PyYAML, which cloud-init uses) resolves to a
// boolean, null, integer (sexagesimal included) or float rather than a string.
var yaml11NonString = regexp.MustCompile(`^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF|~|null|Null|NULL|` +
	`[-+]?0b[01_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+|` +
	`[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|` +
	`[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$`)

// plainNonStrings lists the plain scalars of a document that YAML 1.1 would not read as strings.
func plainNonStrings(n *yaml.Node) []string {
	var out []string
	if n.Kind == yaml.ScalarNode && n.Style == 0 && n.Tag == "!!str" && yaml11NonString.MatchString(n.Value) {
		out = append(out, n.Value)
	}
	for _, c := range n.Content {
		out = append(out, plainNonStrings(c)...)
	}
	return out
}

// TestNetworkConfigRoundTrips renders generated NIC sets (static IPv4 and IPv6 addresses of any
// prefix length, spelled canonically or expanded, gateways, MTUs, MACs in either case, names
// YAML 1.1 would misread) and generated resolver settings. The document parses back, with a
// parser other than the one that wrote it, to exactly the addresses, default routes, MACs and
// nameservers given; DHCPv4 is on exactly where no IPv4 address is; and no value is left
// unquoted that cloud-init's YAML 1.1 parser would read as anything but a string.
func TestNetworkConfigRoundTrips(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nics := genNICs(rt)
		dns, wantNS := genDNS(rt)
		ifaces := make([]Interface, 0, len(nics))
		for _, n := range nics {
			ifaces = append(ifaces, n.in)
		}
		out, err := NetworkConfig(ifaces, dns)
		if err != nil {
			rt.Fatalf("valid interfaces refused: %v", err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(out), &doc); err != nil {
			rt.Fatalf("network-config is not YAML: %v\n%s", err, out)
		}
		if bad := plainNonStrings(&doc); len(bad) > 0 {
			rt.Fatalf("YAML 1.1 would misread unquoted %q:\n%s", bad, out)
		}
		var got struct {
			Version   int `yaml:"version"`
			Ethernets map[string]struct {
				Match       map[string]string `yaml:"match"`
				SetName     string            `yaml:"set-name"`
				DHCP4       bool              `yaml:"dhcp4"`
				Addresses   []string          `yaml:"addresses"`
				MTU         int               `yaml:"mtu"`
				Routes      []struct{ To, Via string }
				Nameservers *struct{ Addresses, Search []string }
			} `yaml:"ethernets"`
		}
		if err := yaml.Unmarshal([]byte(out), &got); err != nil {
			rt.Fatalf("network-config does not have netplan's shape: %v\n%s", err, out)
		}
		if got.Version != 2 || len(got.Ethernets) != len(nics) {
			rt.Fatalf("version %d with %d ethernets, want 2 with %d:\n%s", got.Version, len(got.Ethernets), len(nics), out)
		}
		for i, n := range nics {
			e, ok := got.Ethernets[n.in.Name]
			switch {
			case !ok:
				rt.Fatalf("interface %q missing:\n%s", n.in.Name, out)
			case e.SetName != n.in.Name || e.Match["macaddress"] != strings.ToLower(n.in.MAC) || e.MTU != n.in.MTU:
				rt.Fatalf("interface %q: set-name %q, MAC %q, MTU %d; want %q, %q, %d", n.in.Name, e.SetName, e.Match["macaddress"], e.MTU,
					n.in.Name, strings.ToLower(n.in.MAC), n.in.MTU)
			case e.DHCP4 == n.hasIPv4:
				rt.Fatalf("interface %q: dhcp4 %v with IPv4 address %v", n.in.Name, e.DHCP4, n.hasIPv4)
			}
			var prefixes []netip.Prefix
			for _, a := range e.Addresses {
				p, err := netip.ParsePrefix(a)
				if err != nil {
					rt.Fatalf("interface %q: rendered address %q does not parse: %v", n.in.Name, a, err)
				}
				prefixes = append(prefixes, p)
			}
			if !slices.Equal(prefixes, n.prefixes) {
				rt.Fatalf("interface %q: addresses %v, want %v", n.in.Name, prefixes, n.prefixes)
			}
			var gateways []netip.Addr
			for _, r := range e.Routes {
				via, err := netip.ParseAddr(r.Via)
				if err != nil {
					rt.Fatalf("interface %q: route via %q does not parse: %v", n.in.Name, r.Via, err)
				}
				if wantTo := map[bool]string{true: "0.0.0.0/0", false: "::/0"}[via.Is4()]; r.To != wantTo {
					rt.Fatalf("interface %q: route to %s via %s, want a default route of its family", n.in.Name, r.To, r.Via)
				}
				gateways = append(gateways, via)
			}
			if !slices.Equal(gateways, n.gateways) {
				rt.Fatalf("interface %q: gateways %v, want %v", n.in.Name, gateways, n.gateways)
			}
			withDNS := i == 0 && (len(dns.Nameservers) > 0 || len(dns.SearchDomains) > 0)
			if (e.Nameservers != nil) != withDNS {
				rt.Fatalf("interface %q (#%d): nameservers %+v, want them on the first interface only", n.in.Name, i, e.Nameservers)
			}
			if e.Nameservers == nil {
				continue
			}
			var ns []netip.Addr
			for _, a := range e.Nameservers.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					rt.Fatalf("nameserver %q does not parse: %v", a, err)
				}
				ns = append(ns, ip)
			}
			if !slices.Equal(ns, wantNS) || !slices.Equal(e.Nameservers.Search, dns.SearchDomains) {
				rt.Fatalf("nameservers %v search %v, want %v search %v", ns, e.Nameservers.Search, wantNS, dns.SearchDomains)
			}
		}
	})
}

// badPrefixes are malformed static addresses a person could write: no prefix length, one too
// long for the family, an octet out of range, stray blanks, a zone, a range, nothing at all.
var badPrefixes = []string{"192.0.2.10", "192.0.2.10/33", "192.0.2.10/-1", "192.0.2.256/24", "192.0.2/24", " 192.0.2.10/24",
	"192.0.2.10/24 ", "192.0.2.10/ 24", "2001:db8::10/129", "2001:db8::10", "2001:db8:::10/64", "fe80::1%eth0/64",
	"192.0.2.10-192.0.2.20/24", "", "/24", "localhost/8", "192.0.2.10/24/24", "0x7f.0.0.1/8"}

// TestNetworkConfigRefusesInvalidAddresses slips one malformed address, gateway or nameserver
// into a generated valid NIC set: the rendering is refused, with an error that names the
// offending value (and its interface, for an address or gateway), and no document.
func TestNetworkConfigRefusesInvalidAddresses(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		nics := genNICs(rt)
		dns, _ := genDNS(rt)
		ifaces := make([]Interface, 0, len(nics))
		for _, n := range nics {
			ifaces = append(ifaces, n.in)
		}
		i := rapid.IntRange(0, len(ifaces)-1).Draw(rt, "victim")
		in := &ifaces[i]
		var bad string
		what := rapid.IntRange(0, 2).Draw(rt, "what")
		switch what {
		case 0:
			bad = rapid.SampledFrom(badPrefixes).Draw(rt, "address")
			at := rapid.IntRange(0, len(in.Addresses)).Draw(rt, "at")
			in.Addresses = slices.Insert(slices.Clone(in.Addresses), at, bad)
		case 1:
			bad = rapid.SampledFrom([]string{"192.0.2.256", "192.0.2.1/24", "", " 192.0.2.1", "2001:db8:::1", "gateway"}).Draw(rt, "gateway")
			in.Addresses = append(slices.Clone(in.Addresses), "192.0.2.10/24", "2001:db8::10/64")
			in.Gateways = append(slices.Clone(in.Gateways), bad)
		default:
			bad = rapid.SampledFrom([]string{"192.0.2.256", "8.8.8.8/32", "", "dns.example", "2001:db8:::53"}).Draw(rt, "nameserver")
			dns.Nameservers = append(slices.Clone(dns.Nameservers), bad)
		}
		out, err := NetworkConfig(ifaces, dns)
		switch {
		case err == nil:
			rt.Fatalf("%q accepted:\n%s", bad, out)
		case out != "":
			rt.Fatalf("refused with a document: %q", out)
		case !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)):
			rt.Fatalf("error %q does not name the value %q", err, bad)
		case what < 2 && !strings.Contains(err.Error(), in.Name):
			rt.Fatalf("error %q does not name the interface %q", err, in.Name)
		}
	})
}
