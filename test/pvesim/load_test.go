package pvesim

import (
	"net/http"
	"sync"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
	. "github.com/onsi/gomega"
)

// fastModel is the default model run 100 times faster, for unit tests.
func fastModel() LoadModel {
	m := DefaultLoadModel()
	m.TimeScale = 100
	m.RequestTime = 0
	m.Jitter = 0
	return m
}

func TestLoadModelCosts(t *testing.T) {
	g := NewWithT(t)
	m := DefaultLoadModel()
	g.Expect(m.CloneTime(false, 32<<30)).To(Equal(3*time.Second), "linked clones take seconds whatever the size")
	g.Expect(m.CloneTime(true, 32<<30)).To(Equal(192*time.Second), "full clones take time by GiB")
	g.Expect(m.Wall(3 * time.Second)).To(Equal(300 * time.Millisecond))
	// Three nodes with one local-lvm each, 3s linked clones, one at a time: 60 a minute.
	g.Expect(m.CloneCeiling(3, false, 32<<30)).To(BeNumerically("~", 60, 0.001))
	g.Expect(m.String()).To(And(ContainSubstring("time scale 10x"), ContainSubstring("3 API workers"),
		ContainSubstring("lock timeout 10s"), ContainSubstring("jitter ±20%")))
	g.Expect(LoadModel{}.String()).To(Equal("load model off"))
}

func TestLoadModelSerialisesClonesPerStorage(t *testing.T) {
	g := NewWithT(t)
	m := fastModel() // 3s linked clone = 30ms wall
	m.LockTimeout = time.Minute
	s := StartForTest(t, Config{Load: m})
	ctx := testCtx(t)
	tmpl := &proxmox.VirtualMachine{}
	tmpl.New(tokenClient(t, s), "pve1", 9000)
	start := time.Now()
	var wg sync.WaitGroup
	tasks := make([]*proxmox.Task, 4)
	for i := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, task, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 500 + i})
			g.Expect(err).NotTo(HaveOccurred())
			tasks[i] = task
		}()
	}
	wg.Wait()
	for _, task := range tasks {
		waitOK(ctx, g, task)
	}
	g.Expect(time.Since(start)).To(BeNumerically(">=", 4*m.Wall(m.LinkedCloneTime)),
		"four clones on one node's local-lvm run one after another")
	st := s.LoadStats()
	g.Expect(st.LockWaits).To(BeNumerically(">=", 1))
	g.Expect(st.LockTimeouts).To(BeZero())
	g.Expect(st.Clones).To(Equal(4))
	g.Expect(st.Requests).To(HaveKeyWithValue(cloneEndpoint, 4))
}

func TestLoadModelLockTimeout(t *testing.T) {
	g := NewWithT(t)
	m := fastModel()
	m.LinkedCloneTime = 30 * time.Second // 300ms wall
	m.LockTimeout = 5 * time.Second      // 50ms wall
	s := StartForTest(t, Config{Load: m})
	ctx := testCtx(t)
	tmpl := &proxmox.VirtualMachine{}
	tmpl.New(tokenClient(t, s), "pve1", 9000)
	_, first, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 600})
	g.Expect(err).NotTo(HaveOccurred())
	_, second, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 601})
	g.Expect(err).NotTo(HaveOccurred(), "the clone is accepted; its task waits for the lock")
	g.Expect(second.Wait(ctx, 10*time.Millisecond, 10*time.Second)).To(Succeed())
	g.Expect(second.IsFailed).To(BeTrue())
	g.Expect(second.ExitStatus).To(Equal("clone failed: can't lock file '/var/lock/qemu-server/lock-9000.conf' - got timeout"))
	waitOK(ctx, g, first)
	g.Expect(s.VMs()).NotTo(ContainElement(HaveField("VMID", 601)), "the failed clone leaves no VM")
	g.Expect(s.LoadStats().LockTimeouts).To(Equal(1))
}

func TestLoadModelRefusesBeyondWorkerQueue(t *testing.T) {
	g := NewWithT(t)
	m := fastModel()
	m.APIWorkers, m.APIQueue = 3, 2
	m.RequestTime = 60 * time.Second // each request holds a worker for 600ms wall
	s := StartForTest(t, Config{Load: m})
	const n = 10
	var mu sync.Mutex
	served, refused := 0, 0
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := httpClient(t, s)
			c.Transport.(*http.Transport).DisableKeepAlives = true
			req, _ := http.NewRequest(http.MethodGet, s.URL()+"/version", nil)
			req.Header.Set("Authorization", "PVEAPIToken="+TestTokenID+"="+TestTokenSecret)
			res, err := c.Do(req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refused++
				return
			}
			_ = res.Body.Close()
			if res.StatusCode == http.StatusOK {
				served++
			}
		}()
	}
	wg.Wait()
	st := s.LoadStats()
	g.Expect(served + refused).To(Equal(n))
	g.Expect(served).To(BeNumerically(">=", 5), "three workers and a queue of two serve at least five")
	g.Expect(refused).To(BeNumerically(">=", 1), "ten at once overflow three workers and a queue of two")
	g.Expect(st.Refused).To(Equal(refused), "every refusal is counted")
	g.Expect(st.Queued).To(BeNumerically(">=", 2))
	g.Expect(st.MaxQueue).To(BeNumerically("<=", 2))
}

func TestLoadModelOffByDefault(t *testing.T) {
	g := NewWithT(t)
	s := StartForTest(t, Config{})
	g.Expect(s.LoadModel().Enabled).To(BeFalse())
	status, _ := rawDo(t, s, http.MethodGet, "/version", nil)
	g.Expect(status).To(Equal("200 OK"))
	st := s.LoadStats()
	g.Expect(st.Refused + st.Queued + st.LockWaits).To(BeZero())
	g.Expect(st.Requests).To(HaveKeyWithValue("GET /version", 1))
}
