package cloudinit

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestNetworkConfig(t *testing.T) {
	cases := []struct {
		name   string
		ifaces []Interface
		dns    DNS
		want   string
		err    string
	}{
		{name: "DHCP only", ifaces: []Interface{{Name: "eth0", MAC: "02:AA:BB:CC:DD:EE"}}, want: `ethernets:
  eth0:
    dhcp4: true
    match:
      macaddress: 02:aa:bb:cc:dd:ee
    set-name: eth0
version: 2
`},
		{name: "static dual stack, DNS, MTU and a DHCP second NIC", ifaces: []Interface{
			{Name: "lan", MAC: "02:00:00:00:00:01", MTU: 9000, Addresses: []string{"192.0.2.10/24", "2001:db8::10/64"}, Gateways: []string{"192.0.2.1", "2001:db8::1"}},
			{Name: "storage", MAC: "02:00:00:00:00:02"},
		}, dns: DNS{Nameservers: []string{"192.0.2.53"}, SearchDomains: []string{"example.org"}}, want: `ethernets:
  lan:
    addresses:
    - 192.0.2.10/24
    - 2001:db8::10/64
    dhcp4: false
    match:
      macaddress: "02:00:00:00:00:01"
    mtu: 9000
    nameservers:
      addresses:
      - 192.0.2.53
      search:
      - example.org
    routes:
    - to: 0.0.0.0/0
      via: 192.0.2.1
    - to: ::/0
      via: 2001:db8::1
    set-name: lan
  storage:
    dhcp4: true
    match:
      macaddress: "02:00:00:00:00:02"
    set-name: storage
version: 2
`},
		{name: "IPv6 only keeps DHCPv4", ifaces: []Interface{{Name: "v6", MAC: "02:00:00:00:00:03", Addresses: []string{"2001:db8::5/64"}}}, want: `ethernets:
  v6:
    addresses:
    - 2001:db8::5/64
    dhcp4: true
    match:
      macaddress: "02:00:00:00:00:03"
    set-name: v6
version: 2
`},
		{name: "address without prefix", ifaces: []Interface{{Name: "a", MAC: "02:00:00:00:00:01", Addresses: []string{"192.0.2.10"}}}, err: "address"},
		{name: "gateway of another family", ifaces: []Interface{{Name: "a", MAC: "02:00:00:00:00:01", Addresses: []string{"192.0.2.10/24"}, Gateways: []string{"2001:db8::1"}}}, err: "no address of its family"},
		{name: "bad nameserver", ifaces: []Interface{{Name: "a", MAC: "02:00:00:00:00:01"}}, dns: DNS{Nameservers: []string{"dns.example"}}, err: "nameserver"},
		{name: "duplicate names", ifaces: []Interface{{Name: "a", MAC: "02:00:00:00:00:01"}, {Name: "a", MAC: "02:00:00:00:00:02"}}, err: "twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := NetworkConfig(tc.ifaces, tc.dns)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}
