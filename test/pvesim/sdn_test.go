package pvesim

import (
	"encoding/json"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestSDNErrorsAsPVEGivesThem: IDs, duplicates, deletions of objects still in use and IPAM
// refusals answer with PVE's status lines.
func TestSDNErrorsAsPVEGivesThem(t *testing.T) {
	s := StartForTest(t, Config{})
	must := func(method, path string, form url.Values) {
		t.Helper()
		if status, body := rawDo(t, s, method, path, form); status != "200 OK" {
			t.Fatalf("%s %s: %s %s", method, path, status, body)
		}
	}
	must("POST", "/cluster/sdn/zones", url.Values{"zone": {"za"}, "type": {"simple"}, "ipam": {"pve"}})
	must("POST", "/cluster/sdn/vnets", url.Values{"vnet": {"va"}, "zone": {"za"}, "alias": {"hyperfleet hf-o-1 ns/name"}})
	must("POST", "/cluster/sdn/vnets/va/subnets", url.Values{"subnet": {"10.1.0.0/24"}, "type": {"subnet"}, "gateway": {"10.1.0.1"}})
	must("POST", "/cluster/sdn/vnets/va/ips", url.Values{"zone": {"za"}, "ip": {"10.1.0.5"}, "mac": {"02:00:00:00:00:05"}})
	for _, tc := range []struct {
		name, method, path string
		form               url.Values
		status             string
		errors             map[string]string
	}{
		{name: "zone ID too long", method: "POST", path: "/cluster/sdn/zones", form: url.Values{"zone": {"zonetoolong"}, "type": {"simple"}},
			status: "400 Parameter verification failed.", errors: map[string]string{"zone": "invalid format - zone ID 'zonetoolong' can't be more length than 8 characters\n"}},
		{name: "zone ID with illegal characters", method: "POST", path: "/cluster/sdn/zones", form: url.Values{"zone": {"z-1"}, "type": {"simple"}},
			status: "400 Parameter verification failed.", errors: map[string]string{"zone": "invalid format - zone ID 'z-1' contains illegal characters\n"}},
		{name: "duplicate zone", method: "POST", path: "/cluster/sdn/zones", form: url.Values{"zone": {"za"}, "type": {"simple"}},
			status: "500 create sdn zone object failed: sdn zone object ID 'za' already defined"},
		{name: "vlan zone without bridge", method: "POST", path: "/cluster/sdn/zones", form: url.Values{"zone": {"zb"}, "type": {"vlan"}},
			status: "400 Parameter verification failed.", errors: map[string]string{"bridge": "property is missing and it is not optional"}},
		{name: "zone with a VNet", method: "DELETE", path: "/cluster/sdn/zones/za",
			status: "500 delete sdn zone object failed: zone za is used by vnet va at /usr/share/perl5/PVE/Network/SDN/Zones/Plugin.pm line 159."},
		{name: "VNet with subnets", method: "DELETE", path: "/cluster/sdn/vnets/va",
			status: "500 delete sdn vnet object failed: Can't delete vnet if subnets exists"},
		{name: "duplicate VNet", method: "POST", path: "/cluster/sdn/vnets", form: url.Values{"vnet": {"va"}, "zone": {"za"}},
			status: "500 create sdn vnet object failed: sdn vnet object ID 'va' already defined"},
		{name: "VNet alias outside its pattern", method: "POST", path: "/cluster/sdn/vnets", form: url.Values{"vnet": {"vb"}, "zone": {"za"}, "alias": {"a|b"}},
			status: "400 Parameter verification failed.", errors: map[string]string{"alias": "value does not match the regex pattern"}},
		{name: "tag on a simple zone", method: "POST", path: "/cluster/sdn/vnets", form: url.Values{"vnet": {"vc"}, "zone": {"za"}, "tag": {"5"}},
			status: "400 Parameter verification failed.", errors: map[string]string{"tag": "vlan tag is not allowed on simple zone"}},
		{name: "IP outside the subnets", method: "POST", path: "/cluster/sdn/vnets/va/ips", form: url.Values{"zone": {"za"}, "ip": {"10.9.0.5"}},
			status: "500 can't find any subnet for ip 10.9.0.5 at /usr/share/perl5/PVE/Network/SDN/Subnets.pm line 86."},
		{name: "IP already mapped", method: "POST", path: "/cluster/sdn/vnets/va/ips", form: url.Values{"zone": {"za"}, "ip": {"10.1.0.5"}, "mac": {"02:00:00:00:00:06"}},
			status: "500 IP '10.1.0.5' already exist"},
		{name: "subnet with addresses", method: "DELETE", path: "/cluster/sdn/vnets/va/subnets/za-10.1.0.0-24",
			status: "500 delete sdn subnet object failed: cannot delete subnet '10.1.0.0/24', not empty"},
		{name: "security group name outside its pattern", method: "POST", path: "/cluster/firewall/groups", form: url.Values{"group": {"1bad"}},
			status: "400 Parameter verification failed.", errors: map[string]string{"group": "value does not match the regex pattern"}},
		{name: "storage type option", method: "POST", path: "/storage", form: url.Values{"storage": {"x1"}, "type": {"zfspool"}, "path": {"/x"}},
			status: "400 Parameter verification failed.", errors: map[string]string{"path": "property is not defined in schema and the schema does not allow additional properties",
				"pool": "property is missing and it is not optional"}},
		{name: "duplicate storage", method: "POST", path: "/storage", form: url.Values{"storage": {"local"}, "type": {"dir"}, "path": {"/x"}},
			status: "500 create storage failed: storage ID 'local' already defined"},
		{name: "replication of LVM volumes", method: "POST", path: "/cluster/replication", form: url.Values{"id": {"102-0"}, "type": {"local"}, "target": {"pve1"}},
			status: "500 missing replicate feature on volume 'local-lvm:vm-102-disk-0'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			status, body := rawDo(t, s, tc.method, tc.path, tc.form)
			g.Expect(status).To(Equal(tc.status), string(body))
			if tc.errors != nil {
				var got struct {
					Errors map[string]string `json:"errors"`
				}
				g.Expect(json.Unmarshal(body, &got)).To(Succeed())
				g.Expect(got.Errors).To(Equal(tc.errors))
			}
		})
	}
}

// TestSDNEditsArePendingUntilApplied: a new VNet shows as "new" in the pending view and is no
// bridge a VM can start on until PUT /cluster/sdn; a destroyed VM leaves no IPAM entry.
func TestSDNEditsArePendingUntilApplied(t *testing.T) {
	g := NewWithT(t)
	s := StartForTest(t, Config{TaskDuration: 5 * time.Millisecond, BootDelay: 5 * time.Millisecond})
	do := func(method, path string, form url.Values) string {
		status, body := rawDo(t, s, method, path, form)
		g.Expect(status).To(Equal("200 OK"), string(body))
		return string(body)
	}
	do("POST", "/cluster/sdn/zones", url.Values{"zone": {"zp"}, "type": {"simple"}, "ipam": {"pve"}, "dhcp": {"dnsmasq"}})
	do("POST", "/cluster/sdn/vnets", url.Values{"vnet": {"vp"}, "zone": {"zp"}, "alias": {"pending one"}})
	g.Expect(do("GET", "/cluster/sdn/vnets?pending=1", nil)).To(Equal(`{"data":[{"pending":{"alias":"pending one","zone":"zp"},"state":"new","type":"vnet","vnet":"vp"}]}`))
	g.Expect(do("GET", "/cluster/sdn/vnets?running=1", nil)).To(Equal(`{"data":[]}`))
	do("POST", "/cluster/sdn/vnets/vp/subnets", url.Values{"subnet": {"10.2.0.0/24"}, "type": {"subnet"}, "gateway": {"10.2.0.1"}})

	// VM 102 (pve3, stopped) moves to the VNet.
	do("PUT", "/nodes/pve3/qemu/102/config", url.Values{"net0": {"virtio=02:00:00:00:01:02,bridge=vp"}})
	var upid struct{ Data string }
	g.Expect(json.Unmarshal([]byte(do("POST", "/nodes/pve3/qemu/102/status/start", nil)), &upid)).To(Succeed())
	g.Eventually(func() string {
		_, body := rawDo(t, s, "GET", "/nodes/pve3/tasks/"+url.PathEscape(upid.Data)+"/status", nil)
		var st struct{ Data struct{ Exitstatus string } }
		_ = json.Unmarshal(body, &st)
		return st.Data.Exitstatus
	}).Should(Equal("bridge 'vp' does not exist"))

	g.Expect(json.Unmarshal([]byte(do("PUT", "/cluster/sdn", nil)), &upid)).To(Succeed())
	g.Expect(upid.Data).To(ContainSubstring(":reloadnetworkall::"))
	g.Expect(do("GET", "/cluster/sdn/vnets?pending=1", nil)).To(Equal(`{"data":[{"alias":"pending one","type":"vnet","vnet":"vp","zone":"zp"}]}`))
	do("POST", "/cluster/sdn/vnets/vp/ips", url.Values{"zone": {"zp"}, "ip": {"10.2.0.15"}, "mac": {"02:00:00:00:01:02"}})
	g.Expect(s.IPAM()).To(HaveLen(2), "the gateway and the VM's address")

	g.Expect(s.RemoveVM(102)).To(Succeed())
	g.Expect(s.IPAM()).To(ConsistOf(IPAMEntry{Zone: "zp", VNet: "vp", IP: "10.2.0.1", Gateway: true}))
}

// TestFirewallRulesInOrder: a new rule goes to the top, rules without enable are disabled, a
// port needs a protocol, and a VM rule may bind only an existing group.
func TestFirewallRulesInOrder(t *testing.T) {
	g := NewWithT(t)
	s := StartForTest(t, Config{})
	ok := func(method, path string, form url.Values) {
		status, body := rawDo(t, s, method, path, form)
		g.Expect(status).To(Equal("200 OK"), string(body))
	}
	ok("POST", "/cluster/firewall/groups", url.Values{"group": {"web"}, "comment": {"c"}})
	ok("POST", "/cluster/firewall/groups/web", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "proto": {"tcp"}, "dport": {"443"}, "enable": {"1"}})
	ok("POST", "/cluster/firewall/groups/web", url.Values{"type": {"in"}, "action": {"DROP"}})
	_, rules, _ := s.FirewallGroup("web")
	g.Expect(rules).To(Equal([]map[string]string{{"type": "in", "action": "DROP", "enable": "0"},
		{"type": "in", "action": "ACCEPT", "proto": "tcp", "dport": "443", "enable": "1"}}))

	status, body := rawDo(t, s, "POST", "/cluster/firewall/groups/web", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "dport": {"22"}})
	g.Expect(status).To(Equal("400 Parameter verification failed."))
	g.Expect(string(body)).To(ContainSubstring(`"proto":"missing property - 'dport' requires this property"`))
	status, _ = rawDo(t, s, "POST", "/cluster/firewall/groups", url.Values{"group": {"web"}})
	g.Expect(status).To(Equal("400 Parameter verification failed."))
	status, _ = rawDo(t, s, "DELETE", "/cluster/firewall/groups/web", nil)
	g.Expect(status).To(Equal("500 Security group 'web' is not empty"))

	status, body = rawDo(t, s, "POST", "/nodes/pve3/qemu/102/firewall/rules", url.Values{"type": {"group"}, "action": {"nogroup"}, "iface": {"net0"}})
	g.Expect(status).To(Equal("400 Parameter verification failed."))
	g.Expect(string(body)).To(ContainSubstring(`"action":"no such security group 'nogroup'"`))
	ok("POST", "/nodes/pve3/qemu/102/firewall/rules", url.Values{"type": {"group"}, "action": {"web"}, "iface": {"net0"}, "enable": {"1"}})
	ok("PUT", "/nodes/pve3/qemu/102/firewall/options", url.Values{"enable": {"1"}, "policy_in": {"DROP"}})
	g.Expect(s.FirewallOf(102).Options).To(Equal(map[string]string{"enable": "1", "policy_in": "DROP"}))
	g.Expect(s.RemoveVM(102)).To(Succeed())
	g.Expect(s.FirewallOf(102).Rules).To(BeEmpty(), "the VM's firewall config goes with it")
}
