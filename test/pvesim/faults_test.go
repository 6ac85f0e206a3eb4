package pvesim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
	. "github.com/onsi/gomega"
)

const cloneEndpoint = "POST /nodes/{node}/qemu/{vmid}/clone"

func TestFaultInjection(t *testing.T) {
	t.Run("next N requests fail with a PVE error", func(t *testing.T) {
		g := NewWithT(t)
		s := StartForTest(t, Config{})
		ctx := testCtx(t)
		tmpl := &proxmox.VirtualMachine{}
		tmpl.New(tokenClient(t, s), "pve1", 9000)
		s.InjectFault(Fault{Endpoint: cloneEndpoint, Count: 2, Status: 500, Message: "VM 9000 is locked (clone)"})
		for i := 0; i < 2; i++ {
			_, _, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 400 + i})
			g.Expect(err).To(MatchError("500 VM 9000 is locked (clone)"))
		}
		_, task, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 402})
		g.Expect(err).NotTo(HaveOccurred())
		waitOK(ctx, g, task)
		g.Expect(s.Requests()).To(HaveKeyWithValue(cloneEndpoint, 3))
		g.Expect(s.Faults()).To(BeEmpty())
	})

	t.Run("a lost response: the clone is carried out, the client gets no answer", func(t *testing.T) {
		g := NewWithT(t)
		s := StartForTest(t, Config{})
		ctx := testCtx(t)
		tmpl := &proxmox.VirtualMachine{}
		tmpl.New(tokenClient(t, s), "pve1", 9000)
		s.InjectFault(Fault{Endpoint: cloneEndpoint, Count: 1, LoseResponse: true})
		_, _, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 410})
		g.Expect(err).To(HaveOccurred(), "the connection closes without an answer")
		g.Eventually(func() []int {
			var ids []int
			for _, vm := range s.VMs() {
				ids = append(ids, vm.VMID)
			}
			return ids
		}, 5*time.Second, 20*time.Millisecond).Should(ContainElement(410), "yet the clone was made")
		_, task, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 411})
		g.Expect(err).NotTo(HaveOccurred(), "the next request is answered")
		waitOK(ctx, g, task)
	})

	t.Run("a hung POST frees its API worker when the client gives up", func(t *testing.T) {
		g := NewWithT(t)
		m := DefaultLoadModel()
		m.APIWorkers, m.TimeScale = 1, 100
		s := StartForTest(t, Config{Load: m})
		s.InjectFault(Fault{Endpoint: cloneEndpoint, Count: 1, Hang: true})
		c := httpClient(t, s)
		c.Timeout = 300 * time.Millisecond
		req, _ := http.NewRequest(http.MethodPost, s.URL()+"/nodes/pve1/qemu/9000/clone", strings.NewReader("newid=420"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "PVEAPIToken="+TestTokenID+"="+TestTokenSecret)
		_, err := c.Do(req)
		g.Expect(err).To(HaveOccurred(), "the hung request times out")
		status, _ := rawDo(t, s, "GET", "/version", nil)
		g.Expect(status).To(Equal("200 OK"), "the only worker serves the next request")
	})

	t.Run("rate is seeded and roughly honoured", func(t *testing.T) {
		g := NewWithT(t)
		count := func() int {
			s := StartForTest(t, Config{Seed: 7})
			s.InjectFault(Fault{Endpoint: "GET /version", Rate: 0.3, Status: 596, Message: "Connection timed out"})
			failed := 0
			for i := 0; i < 100; i++ {
				status, _ := rawDo(t, s, "GET", "/version", nil)
				if status == "596 Connection timed out" {
					failed++
				} else {
					g.Expect(status).To(Equal("200 OK"))
				}
			}
			return failed
		}
		first := count()
		g.Expect(first).To(BeNumerically("~", 30, 15))
		g.Expect(count()).To(Equal(first), "same seed, same failures")
	})

	t.Run("latency", func(t *testing.T) {
		g := NewWithT(t)
		s := StartForTest(t, Config{})
		s.InjectFault(Fault{Endpoint: "GET /version", Latency: 150 * time.Millisecond})
		start := time.Now()
		_, err := tokenClient(t, s).Version(testCtx(t))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(time.Since(start)).To(BeNumerically(">=", 150*time.Millisecond))
	})

	t.Run("hang until the client gives up", func(t *testing.T) {
		g := NewWithT(t)
		s := StartForTest(t, Config{})
		s.InjectFault(Fault{Endpoint: "GET /cluster/resources", Hang: true})
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		cl := &proxmox.Cluster{}
		cl = cl.New(tokenClient(t, s))
		start := time.Now()
		_, err := cl.Resources(ctx, "vm")
		g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue(), "%v", err)
		g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
	})

	t.Run("incomplete listing", func(t *testing.T) {
		g := NewWithT(t)
		s := StartForTest(t, Config{})
		cl := (&proxmox.Cluster{}).New(tokenClient(t, s))
		nodesOf := func() map[string]bool {
			rs, err := cl.Resources(testCtx(t), "vm")
			g.Expect(err).NotTo(HaveOccurred())
			out := map[string]bool{}
			for _, r := range rs {
				out[r.Node] = true
			}
			return out
		}
		g.Expect(nodesOf()).To(HaveKey("pve1"))
		s.InjectFault(Fault{Endpoint: "GET /cluster/resources", Count: 1, OmitNodes: []string{"pve1"}})
		g.Expect(nodesOf()).NotTo(HaveKey("pve1"), "the faulty listing misses pve1's VMs")
		g.Expect(nodesOf()).To(HaveKey("pve1"), "the next one is complete")
		_, exists := s.VM(9000)
		g.Expect(exists).To(BeTrue(), "the VMs themselves are untouched")
	})

	t.Run("failing task", func(t *testing.T) {
		g := NewWithT(t)
		s := StartForTest(t, Config{})
		ctx := testCtx(t)
		s.InjectFault(Fault{Endpoint: cloneEndpoint, Count: 1, TaskExitStatus: "clone failed: lvcreate 'pve/vm-500-disk-0' error: out of space"})
		tmpl := &proxmox.VirtualMachine{}
		tmpl.New(tokenClient(t, s), "pve1", 9000)
		_, task, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 500})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(task.Wait(ctx, 10*time.Millisecond, 5*time.Second)).To(Succeed(), "go-proxmox's Wait does not report task failure")
		g.Expect(task.IsFailed).To(BeTrue())
		g.Expect(task.ExitStatus).To(Equal("clone failed: lvcreate 'pve/vm-500-disk-0' error: out of space"))
		_, exists := s.VM(500)
		g.Expect(exists).To(BeFalse(), "a failed clone leaves no VM behind")
	})
}

func TestRequestCounters(t *testing.T) {
	g := NewWithT(t)
	s := StartForTest(t, Config{})
	rawDo(t, s, "GET", "/nodes/pve1/qemu/100/config", nil)
	rawDo(t, s, "GET", "/nodes/pve2/qemu/101/config", nil)
	rawDo(t, s, "GET", "/nodes/pve1/nope", nil)
	g.Expect(s.Requests()).To(Equal(map[string]int{
		"GET /nodes/{node}/qemu/{vmid}/config": 2,
		"GET /nodes/pve1/nope":                 1,
	}))
	s.ResetRequests()
	g.Expect(s.Requests()).To(BeEmpty())
}

func TestTagNormalisation(t *testing.T) {
	s := StartForTest(t, Config{})
	c := tokenClient(t, s)
	ctx := testCtx(t)
	tests := []struct{ in, want string }{
		{"Zeta;alpha,ALPHA beta", "alpha;beta;zeta"},
		{"hyperfleet;pool-a;runner", "hyperfleet;pool-a;runner"},
		{"b+1;a.2;_c", "_c;a.2;b+1"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			g := NewWithT(t)
			vm := &proxmox.VirtualMachine{}
			vm.New(c, "pve3", 102)
			g.Expect(vm.ConfigSync(ctx, proxmox.VirtualMachineOption{Name: "tags", Value: tc.in})).To(Succeed())
			g.Expect(s.mustVM(t, 102).Config["tags"]).To(Equal(tc.want))
		})
	}
}

func TestBootHookPowersOff(t *testing.T) {
	g := NewWithT(t)
	got := make(chan BootVM, 1)
	s := StartForTest(t, Config{BootHook: func(ctx context.Context, vm BootVM) error {
		got <- vm
		return nil // the guest's job is done: it powers off
	}})
	c := tokenClient(t, s)
	ctx := testCtx(t)
	tmpl := &proxmox.VirtualMachine{}
	tmpl.New(c, "pve1", 9000)
	_, task, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 600, Name: "job-600"})
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	node, err := c.Node(ctx, "pve1")
	g.Expect(err).NotTo(HaveOccurred())
	vm, err := node.VirtualMachine(ctx, 600)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.CloudInit(ctx, "ide2", "#cloud-config\nhostname: job-600\n", "instance-id: i-600\n", "", "version: 2\n")).To(Succeed())
	task, err = vm.Start(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	var b BootVM
	g.Eventually(got).Should(Receive(&b))
	g.Expect(string(b.UserData)).To(Equal("#cloud-config\nhostname: job-600\n"))
	g.Expect(string(b.MetaData)).To(Equal("instance-id: i-600\n"))
	g.Expect(string(b.NetworkConfig)).To(Equal("version: 2\n"))
	g.Expect(b.Name).To(Equal("job-600"))
	g.Eventually(func() string { return s.mustVM(t, 600).Status }).Should(Equal("stopped"))
}

func TestBootHookCancelledByStopAndCicustom(t *testing.T) {
	g := NewWithT(t)
	cancelled := make(chan int, 1)
	s := StartForTest(t, Config{BootHook: func(ctx context.Context, vm BootVM) error {
		if string(vm.UserData) != "from snippet" {
			return errors.New("unexpected user-data " + string(vm.UserData))
		}
		<-ctx.Done()
		cancelled <- vm.VMID
		return ctx.Err()
	}})
	g.Expect(s.PutStorageFile("pve3", "local:snippets/u.yaml", []byte("from snippet"))).To(Succeed())
	c := tokenClient(t, s)
	ctx := testCtx(t)
	vm := &proxmox.VirtualMachine{}
	vm.New(c, "pve3", 102)
	g.Expect(vm.ConfigSync(ctx, proxmox.VirtualMachineOption{Name: "cicustom", Value: "user=local:snippets/u.yaml"})).To(Succeed())
	task, err := vm.Start(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	waitOK(ctx, g, task)
	g.Consistently(cancelled).WithTimeout(100 * time.Millisecond).ShouldNot(Receive())
	g.Expect(s.mustVM(t, 102).Status).To(Equal("running"))
	g.Expect(s.PowerOff(102)).To(Succeed())
	g.Eventually(cancelled).Should(Receive(Equal(102)))
}

func TestAdminEndpoint(t *testing.T) {
	g := NewWithT(t)
	s := StartForTest(t, Config{})
	hc := httpClient(t, s)
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, s.AdminURL()+path, strings.NewReader(body))
		res, err := hc.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = res.Body.Close() }()
		var b strings.Builder
		_, _ = io.Copy(&b, res.Body)
		return res.StatusCode, b.String()
	}
	code, body := do("GET", "/vms", "")
	g.Expect(code).To(Equal(200))
	var vms []VM
	g.Expect(json.Unmarshal([]byte(body), &vms)).To(Succeed())
	g.Expect(vms).To(HaveLen(6))

	code, _ = do("POST", "/vms/100/poweroff", "")
	g.Expect(code).To(Equal(200))
	g.Expect(s.mustVM(t, 100).Status).To(Equal("stopped"))
	code, _ = do("DELETE", "/vms/9001", "")
	g.Expect(code).To(Equal(200))
	_, ok := s.VM(9001)
	g.Expect(ok).To(BeFalse())

	code, body = do("POST", "/faults", `{"endpoint":"GET /version","count":1,"status":596,"message":"Connection timed out","latency":"10ms"}`)
	g.Expect(code).To(Equal(201), body)
	status, _ := rawDo(t, s, "GET", "/version", nil)
	g.Expect(status).To(Equal("596 Connection timed out"))
	status, _ = rawDo(t, s, "GET", "/version", nil)
	g.Expect(status).To(Equal("200 OK"))
	code, body = do("GET", "/requests", "")
	g.Expect(code).To(Equal(200))
	g.Expect(body).To(ContainSubstring(`"GET /version":2`))
	code, _ = do("DELETE", "/requests", "")
	g.Expect(code).To(Equal(200))
	g.Expect(s.Requests()).To(BeEmpty())

	code, _ = do("POST", "/nodes/pve2/offline", "")
	g.Expect(code).To(Equal(200))
	status, _ = rawDo(t, s, "GET", "/nodes/pve2/qemu", nil)
	g.Expect(status).To(Equal("595 No route to host"))
}

func TestLoadInventory(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "inventory.yaml")
	g.Expect(os.WriteFile(path, []byte(`
clusterName: lab
nodes:
  - {name: alpha, cpus: 8, memoryMiB: 32768, baseMemoryUsedMiB: 1024}
  - {name: beta, cpus: 8, memoryMiB: 32768, offline: true}
storages:
  - {name: ceph, type: rbd, content: [images], shared: true, totalGiB: 1000}
  - {name: local, type: dir, content: [iso, snippets]}
pools:
  - {id: runners, comment: CI runners}
vms:
  - vmid: 8000
    node: alpha
    name: tmpl
    template: true
    tags: [Runner, template]
    config: {cores: "2", memory: "1024", scsi0: "ceph:base-8000-disk-0,size=10G", net0: "virtio=BC:24:11:00:80:00,bridge=vmbr1", agent: "1"}
  - {vmid: 150, node: alpha, name: db, running: true, pool: runners, config: {memory: "4096"}}
files:
  - {volume: "local:snippets/user.yaml", content: "#cloud-config\n"}
`), 0o600)).To(Succeed())
	inv, err := LoadInventory(path)
	g.Expect(err).NotTo(HaveOccurred())
	s := StartForTest(t, Config{Inventory: inv})
	vms := s.VMs()
	g.Expect(vms).To(HaveLen(2))
	g.Expect(vms[0].VMID).To(Equal(150))
	g.Expect(vms[0].Status).To(Equal("running"))
	g.Expect(vms[0].Pool).To(Equal("runners"))
	g.Expect(vms[1].Template).To(BeTrue())
	g.Expect(vms[1].Tags).To(Equal([]string{"runner", "template"}))
	data, ok := s.StorageFile("alpha", "local:snippets/user.yaml")
	g.Expect(ok).To(BeTrue())
	g.Expect(string(data)).To(Equal("#cloud-config\n"))
	status, _ := rawDo(t, s, "GET", "/nodes/beta/status", nil)
	g.Expect(status).To(Equal("595 No route to host"))

	// A shared storage allows cloning to another node.
	_, err = LoadInventory(filepath.Join(t.TempDir(), "missing.yaml"))
	g.Expect(err).To(HaveOccurred())
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	g.Expect(os.WriteFile(bad, []byte("nodes: [{name: a, bogus: 1}]\n"), 0o600)).To(Succeed())
	_, err = LoadInventory(bad)
	g.Expect(err).To(MatchError(ContainSubstring("bogus")))
}
