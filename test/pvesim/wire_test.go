package pvesim

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
	. "github.com/onsi/gomega"
)

// rawExchange writes an HTTP/1.1 request over TLS and returns the response's
// status line, headers and body exactly as they came over the wire.
func rawExchange(t *testing.T, s *Simulator, request string) (string, map[string]string, string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CACertPEM())
	host := strings.TrimPrefix(strings.TrimSuffix(s.URL(), "/api2/json"), "https://")
	conn, err := tls.Dial("tcp", host, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	status, err := r.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	headers := map[string]string{}
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			break
		}
		k, v, _ := strings.Cut(line, ": ")
		headers[k] = v
	}
	body, _ := io.ReadAll(r)
	return strings.TrimRight(status, "\r\n"), headers, string(body)
}

func TestReasonPhraseOnTheWire(t *testing.T) {
	s := StartForTest(t, Config{})
	tests := []struct {
		name, request, status, body string
	}{
		{
			name:    "missing VM config",
			request: "GET /api2/json/nodes/pve1/qemu/999/config HTTP/1.1\r\nHost: x\r\nAuthorization: PVEAPIToken=" + TestTokenID + "=" + TestTokenSecret + "\r\n\r\n",
			status:  "HTTP/1.1 500 Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist",
			body:    `{"data":null,"message":"Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist\n"}`,
		},
		{
			name:    "VM on another node",
			request: "POST /api2/json/nodes/pve2/qemu/100/status/reset HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nAuthorization: PVEAPIToken=" + TestTokenID + "=" + TestTokenSecret + "\r\n\r\n",
			status:  "HTTP/1.1 500 unable to find configuration file for VM 100 on node 'pve2'",
			body:    `{"data":null,"message":"unable to find configuration file for VM 100 on node 'pve2'\n"}`,
		},
		{
			name:    "no ticket",
			request: "GET /api2/json/version HTTP/1.1\r\nHost: x\r\n\r\n",
			status:  "HTTP/1.1 401 No ticket",
		},
		{
			name:    "bad token",
			request: "GET /api2/json/version HTTP/1.1\r\nHost: x\r\nAuthorization: PVEAPIToken=" + TestTokenID + "=wrong\r\n\r\n",
			status:  "HTTP/1.1 401 Authentication failed!",
		},
		{
			name:    "not implemented",
			request: "GET /api2/json/nodes/pve1/foo HTTP/1.1\r\nHost: x\r\nAuthorization: PVEAPIToken=" + TestTokenID + "=" + TestTokenSecret + "\r\n\r\n",
			status:  "HTTP/1.1 501 Method 'GET /nodes/pve1/foo' not implemented",
			body:    `{"data":null,"message":"Method 'GET /nodes/pve1/foo' not implemented\n"}`,
		},
		{
			name:    "unknown node",
			request: "GET /api2/json/nodes/pve9/status HTTP/1.1\r\nHost: x\r\nAuthorization: PVEAPIToken=" + TestTokenID + "=" + TestTokenSecret + "\r\n\r\n",
			status:  "HTTP/1.1 500 hostname lookup 'pve9' failed - failed to get address info for: pve9: Name or service not known",
			body:    `{"data":null,"message":"hostname lookup 'pve9' failed - failed to get address info for: pve9: Name or service not known\n"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			status, headers, body := rawExchange(t, s, tc.request)
			g.Expect(status).To(Equal(tc.status))
			g.Expect(headers).To(HaveKeyWithValue("Connection", "close"))
			g.Expect(headers).To(HaveKeyWithValue("Server", "pve-api-daemon/3.0"))
			g.Expect(body).To(Equal(tc.body))
		})
	}
}

func TestGoProxmoxSeesPVEErrorText(t *testing.T) {
	s := StartForTest(t, Config{TaskDuration: 300 * time.Millisecond})
	c := tokenClient(t, s)
	ctx := testCtx(t)
	g := NewWithT(t)
	node, err := c.Node(ctx, "pve1")
	g.Expect(err).NotTo(HaveOccurred())
	tmpl, err := node.VirtualMachine(ctx, 9000)
	g.Expect(err).NotTo(HaveOccurred())

	// While the clone task runs, the new VM refuses config changes.
	_, task, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 200})
	g.Expect(err).NotTo(HaveOccurred())
	locked := &proxmox.VirtualMachine{}
	locked.New(c, "pve1", 200)
	_, err = locked.Config(ctx, proxmox.VirtualMachineOption{Name: "cores", Value: 2})
	g.Expect(err).To(MatchError("500 VM is locked (clone)"))
	err = locked.ConfigSync(ctx, proxmox.VirtualMachineOption{Name: "cores", Value: 2})
	g.Expect(err).To(MatchError("500 VM is locked (clone)"))

	// Parallel clones from one template are fine; a taken VMID is not.
	_, task2, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 201})
	g.Expect(err).NotTo(HaveOccurred())
	_, _, err = tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 200})
	g.Expect(err).To(MatchError("500 unable to create VM 200: config file already exists"))
	_, _, err = tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 202, Storage: "local-lvm"})
	g.Expect(err).To(MatchError("500 parameter 'storage' not allowed for linked clones"))
	running := &proxmox.VirtualMachine{}
	running.New(c, "pve1", 100)
	_, _, err = running.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 203, Full: false})
	g.Expect(err).NotTo(HaveOccurred(), "full=0 is omitted by go-proxmox, so a normal VM gets a full clone")
	waitOK(ctx, g, task)
	waitOK(ctx, g, task2)

	// A VMID taken on another node passes the early check but fails the task.
	_, task, err = tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 9001})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(task.Wait(ctx, 10*time.Millisecond, 5*time.Second)).To(Succeed())
	g.Expect(task.IsFailed).To(BeTrue())
	g.Expect(task.ExitStatus).To(Equal("clone failed: close (rename) atomic file '/etc/pve/nodes/pve1/qemu-server/9001.conf' failed: File exists"))

	cl, err := c.Cluster(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	free, err := cl.CheckID(ctx, 200)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(free).To(BeFalse())
	status, body := rawDo(t, s, "GET", "/cluster/nextid?vmid=200", nil)
	g.Expect(status).To(Equal("400 Parameter verification failed."))
	g.Expect(string(body)).To(Equal(`{"data":null,"errors":{"vmid":"VM 200 already exists"},"message":"Parameter verification failed.\n"}`))
	status, body = rawDo(t, s, "GET", "/cluster/nextid?vmid=555", nil)
	g.Expect(status).To(Equal("200 OK"))
	g.Expect(string(body)).To(Equal(`{"data":"555"}`))

	// Destroying a running VM is refused synchronously.
	_, err = running.Delete(ctx, nil)
	g.Expect(err).To(MatchError("500 VM 100 is running - destroy failed"))
}

func TestJSONTypes(t *testing.T) {
	s := StartForTest(t, Config{})
	g := NewWithT(t)
	_, body := rawDo(t, s, "GET", "/cluster/nextid", nil)
	g.Expect(string(body)).To(Equal(`{"data":"104"}`))
	_, body = rawDo(t, s, "GET", "/nodes/pve1/qemu/9000/config", nil)
	g.Expect(string(body)).To(ContainSubstring(`"memory":"2048"`))
	g.Expect(string(body)).To(ContainSubstring(`"cores":2`))
	g.Expect(string(body)).To(ContainSubstring(`"template":1`))
	g.Expect(string(body)).To(ContainSubstring(`"agent":"1"`))
	_, body = rawDo(t, s, "GET", "/nodes/pve1/qemu/100/status/current", nil)
	g.Expect(string(body)).NotTo(ContainSubstring(`"template"`), "template is absent on non-templates")
	g.Expect(string(body)).NotTo(ContainSubstring(`"lock"`))
	g.Expect(string(body)).To(ContainSubstring(`"qmpstatus":"running"`))
	g.Expect(string(body)).To(ContainSubstring(`"vmid":100`))
	_, body = rawDo(t, s, "POST", "/nodes/pve1/qemu/100/status/reboot", url.Values{})
	upid := strings.Trim(strings.TrimSuffix(strings.TrimPrefix(string(body), `{"data":`), "}"), `"`)
	g.Expect(upid).To(MatchRegexp(`^UPID:pve1:[0-9A-F]{8}:[0-9A-F]{8}:[0-9A-F]{8}:qmreboot:100:hyperfleet@pve!test:$`))
	_, body = rawDo(t, s, "GET", "/nodes/pve1/tasks/"+upid+"/status", nil)
	g.Expect(string(body)).To(MatchRegexp(`"starttime":\d+`))
	g.Expect(string(body)).To(MatchRegexp(`"pid":\d+`))
	g.Expect(string(body)).To(ContainSubstring(`"user":"hyperfleet@pve"`))
	g.Expect(string(body)).To(ContainSubstring(`"tokenid":"test"`))
}

func TestTicketAuthAndCSRF(t *testing.T) {
	s := StartForTest(t, Config{Users: map[string]string{"root@pam": "s3cret"}})
	g := NewWithT(t)
	ctx := testCtx(t)
	c := proxmox.NewClient(s.URL(), proxmox.WithHTTPClient(httpClient(t, s)),
		proxmox.WithCredentials(&proxmox.Credentials{Username: "root@pam", Password: "s3cret"}))
	g.Expect(c.CreateSession(ctx)).To(Succeed())
	sess := c.Session()
	g.Expect(sess.Ticket).To(HavePrefix("PVE:root@pam:"))
	node, err := c.Node(ctx, "pve3")
	g.Expect(err).NotTo(HaveOccurred())
	vm, err := node.VirtualMachine(ctx, 102)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.ConfigSync(ctx, proxmox.VirtualMachineOption{Name: "description", Value: "via ticket"})).To(Succeed())
	g.Expect(s.mustVM(t, 102).Description).To(Equal("via ticket"))

	// Writes without the CSRF token are refused; reads are not.
	do := func(method, path, csrf string) string {
		req, _ := http.NewRequest(method, s.URL()+path, strings.NewReader(url.Values{"description": {"x"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Cookie", "PVEAuthCookie="+url.QueryEscape(sess.Ticket))
		if csrf != "" {
			req.Header.Set("CSRFPreventionToken", csrf)
		}
		res, err := httpClient(t, s).Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		_ = res.Body.Close()
		return res.Status
	}
	g.Expect(do("PUT", "/nodes/pve3/qemu/102/config", "")).To(Equal("401 Permission denied - invalid csrf token"))
	g.Expect(do("PUT", "/nodes/pve3/qemu/102/config", sess.CSRFPreventionToken)).To(Equal("200 OK"))
	g.Expect(do("GET", "/version", "")).To(Equal("200 OK"))

	bad := proxmox.NewClient(s.URL(), proxmox.WithHTTPClient(httpClient(t, s)),
		proxmox.WithCredentials(&proxmox.Credentials{Username: "root@pam", Password: "wrong"}))
	_, err = bad.Version(ctx)
	g.Expect(err).To(HaveOccurred())
	status, body := rawDo(t, s, "POST", "/access/ticket", url.Values{"username": {"root@pam"}, "password": {"nope"}})
	g.Expect(status).To(Equal("401 authentication failure"))
	g.Expect(string(body)).To(Equal(`{"data":null,"message":"authentication failure\n"}`))
}

func TestReadOnlyTokenGets403(t *testing.T) {
	s := StartForTest(t, Config{Tokens: []Token{
		{ID: TestTokenID, Secret: TestTokenSecret, Privileges: []string{"VM.Audit", "Sys.Audit", "Datastore.Audit"}},
	}})
	g := NewWithT(t)
	ctx := testCtx(t)
	c := tokenClient(t, s)
	node, err := c.Node(ctx, "pve1")
	g.Expect(err).NotTo(HaveOccurred())
	tmpl, err := node.VirtualMachine(ctx, 9000)
	g.Expect(err).NotTo(HaveOccurred(), "reads are allowed")
	_, _, err = tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 300})
	g.Expect(proxmox.IsNotAuthorized(err)).To(BeTrue())

	tests := []struct{ method, path, status string }{
		{"POST", "/nodes/pve1/qemu/9000/clone", "403 Permission check failed (/vms/9000, VM.Clone)"},
		{"DELETE", "/nodes/pve1/qemu/100", "403 Permission check failed (/vms/100, VM.Allocate)"},
		{"POST", "/nodes/pve1/qemu/100/status/stop", "403 Permission check failed (/vms/100, VM.PowerMgmt)"},
	}
	for _, tc := range tests {
		form := url.Values{"newid": {"300"}}
		if tc.method == "DELETE" {
			form = nil
		}
		status, body := rawDo(t, s, tc.method, tc.path, form)
		g.Expect(status).To(Equal(tc.status))
		g.Expect(string(body)).To(Equal(fmt.Sprintf(`{"data":null,"message":"%s\n"}`, strings.TrimPrefix(tc.status, "403 "))))
	}
	_, ok := s.VM(300)
	g.Expect(ok).To(BeFalse())
}
