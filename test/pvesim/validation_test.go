package pvesim

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// rawDo sends a request with the test token and returns status line and body.
func rawDo(t *testing.T, s *Simulator, method, path string, form url.Values) (string, []byte) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, s.URL()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Authorization", "PVEAPIToken="+TestTokenID+"="+TestTokenSecret)
	res, err := httpClient(t, s).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.Status, b
}

func TestSchemaValidation(t *testing.T) {
	s := StartForTest(t, Config{})
	tests := []struct {
		name   string
		method string
		path   string
		form   url.Values
		errors map[string]string
	}{
		{
			name: "unknown parameter", method: "GET", path: "/cluster/resources?foo=1",
			errors: map[string]string{"foo": "property is not defined in schema and the schema does not allow additional properties"},
		},
		{
			name: "bad enum", method: "GET", path: "/cluster/resources?type=vms",
			errors: map[string]string{"type": "value 'vms' does not have a value in the enumeration 'vm, storage, node, sdn'"},
		},
		{
			name: "wrong type", method: "POST", path: "/nodes/pve1/qemu/9000/clone", form: url.Values{"newid": {"abc"}},
			errors: map[string]string{"newid": "type check ('integer') failed - got 'abc'"},
		},
		{
			name: "missing required", method: "POST", path: "/nodes/pve1/qemu/9000/clone", form: url.Values{"name": {"x"}},
			errors: map[string]string{"newid": "property is missing and it is not optional"},
		},
		{
			name: "below minimum", method: "POST", path: "/nodes/pve1/qemu/9000/clone", form: url.Values{"newid": {"99"}},
			errors: map[string]string{"newid": "invalid format - value does not look like a valid VM ID\n"},
		},
		{
			name: "boolean must be 0 or 1", method: "POST", path: "/nodes/pve1/qemu/9000/clone", form: url.Values{"newid": {"200"}, "full": {"true"}},
			errors: map[string]string{"full": "type check ('boolean') failed - got 'true'"},
		},
		{
			name: "regex pattern", method: "PUT", path: "/nodes/pve1/qemu/100/resize", form: url.Values{"disk": {"scsi0"}, "size": {"10 GB"}},
			errors: map[string]string{"size": "value does not match the regex pattern"},
		},
		{
			name: "tag list format", method: "PUT", path: "/nodes/pve1/qemu/100/config", form: url.Values{"tags": {"ok;not ok!"}},
			errors: map[string]string{"tags": "invalid format - invalid characters in tag\n"},
		},
		{
			name: "indexed parameter beyond its range", method: "PUT", path: "/nodes/pve1/qemu/100/config", form: url.Values{"net99": {"virtio,bridge=vmbr0"}},
			errors: map[string]string{"net99": "property is not defined in schema and the schema does not allow additional properties"},
		},
		{
			name: "net property string with a bad VLAN tag", method: "PUT", path: "/nodes/pve1/qemu/100/config", form: url.Values{"net1": {"virtio,bridge=vmbr0,tag=abc"}},
			errors: map[string]string{"net1": "invalid format - format error\nnet1.tag: type check ('integer') failed - got 'abc'\n"},
		},
		{
			name: "net property string with an unknown key", method: "PUT", path: "/nodes/pve1/qemu/100/config", form: url.Values{"net1": {"virtio,bridge=vmbr0,vlan=3"}},
			errors: map[string]string{"net1": "invalid format - invalid key in comma-separated list property: vlan\n"},
		},
		{
			name: "net MTU beyond PVE's maximum", method: "PUT", path: "/nodes/pve1/qemu/100/config", form: url.Values{"net1": {"virtio=02:00:00:00:00:01,bridge=vmbr1,mtu=70000"}},
			errors: map[string]string{"net1": "invalid format - format error\nnet1.mtu: value must have a maximum value of 65520\n"},
		},
		{
			name: "vmid in the path", method: "GET", path: "/nodes/pve1/qemu/abc/config",
			errors: map[string]string{"vmid": "type check ('integer') failed - got 'abc'"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			status, body := rawDo(t, s, tc.method, tc.path, tc.form)
			g.Expect(status).To(Equal("400 Parameter verification failed."))
			want, err := json.Marshal(map[string]any{"data": nil, "errors": tc.errors, "message": "Parameter verification failed.\n"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(body)).To(Equal(string(want)))
		})
	}
}

func TestValidRequestsPass(t *testing.T) {
	s := StartForTest(t, Config{})
	tests := []struct {
		name, method, path string
		form               url.Values
	}{
		{"vm filter", "GET", "/cluster/resources?type=vm", nil},
		{"net with mac alias", "PUT", "/nodes/pve3/qemu/102/config", url.Values{"net1": {"virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=20,firewall=1"}}},
		{"memory property string", "PUT", "/nodes/pve3/qemu/102/config", url.Values{"memory": {"current=3072"}}},
		{"ipconfig", "PUT", "/nodes/pve3/qemu/102/config", url.Values{"ipconfig0": {"ip=dhcp"}}},
		{"delete list", "PUT", "/nodes/pve3/qemu/102/config", url.Values{"delete": {"ipconfig0,onboot"}}},
		{"second NIC with firewall, MTU and VLAN", "PUT", "/nodes/pve3/qemu/102/config", url.Values{"net1": {"virtio=02:AB:CD:EF:01:23,bridge=vmbr1,firewall=1,mtu=9000,tag=42"}}},
		{"new disk with a serial", "PUT", "/nodes/pve3/qemu/102/config", url.Values{"virtio1": {"local-lvm:4,serial=wal"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			status, body := rawDo(t, s, tc.method, tc.path, tc.form)
			g.Expect(status).To(Equal("200 OK"), string(body))
		})
	}
}
