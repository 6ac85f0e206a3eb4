package console

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/console"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestOpenAPIDocumentMatchesHandlers: every operation of /api/v1/openapi.json is served by a
// handler, and every handler is in the document.
func TestOpenAPIDocumentMatchesHandlers(t *testing.T) {
	g := NewWithT(t)
	f := startConsole(t)
	r := f.call(t, http.MethodGet, "/api/v1/openapi.json", "", nil)
	g.Expect(r.Status).To(Equal(http.StatusOK))
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	r.decode(t, &doc)
	g.Expect(doc.OpenAPI).To(HavePrefix("3."))
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(documented)
	g.Expect(documented).To(Equal(f.server.Operations()))

	// Each documented operation reaches its handler: an anonymous call is told to sign in, where an
	// unrouted one would be 404 or 405.
	for _, op := range documented {
		method, path, _ := strings.Cut(op, " ")
		if path == "/api/v1/openapi.json" {
			continue
		}
		path = strings.NewReplacer("{namespace}", teamA, "{name}", "x", "{id}", "create:"+teamA+":x").Replace(path)
		got := f.call(t, method, path, "", nil)
		g.Expect(got.Status).To(Equal(http.StatusUnauthorized), op)
	}
}

// TestCreateVMValidation: a bad request is refused with every bad field named, before anything is
// created.
func TestCreateVMValidation(t *testing.T) {
	g := NewWithT(t)
	f := startConsole(t)
	tok := f.token(t, alice, fakeoidc.TokenOptions{})
	r := f.call(t, http.MethodPost, "/api/v1/vms", tok, console.CreateVMRequest{
		Namespace: teamA, Name: "Bad_Name", Cluster: "pve", Template: "", CPUs: 1000, MemoryMiB: 12, VLAN: 5000, Bridge: "no bridge!",
		UserData: "runcmd: []"})
	g.Expect(r.Status).To(Equal(http.StatusUnprocessableEntity), string(r.Body))
	var fields []string
	for _, e := range r.problem(t).Errors {
		fields = append(fields, e.Field)
	}
	g.Expect(fields).To(ConsistOf("name", "template", "cpus", "memoryMiB", "vlan", "bridge", "userData"))

	r = f.call(t, http.MethodPost, "/api/v1/vms", tok, map[string]any{"namespace": teamA, "name": "x", "cluster": "pve", "template": "9000", "cores": 2})
	g.Expect(r.Status).To(Equal(http.StatusBadRequest))
	g.Expect(r.problem(t).Errors).To(ConsistOf(console.FieldError{Field: "cores", Message: "is not a known field"}))

	r = f.call(t, http.MethodPost, "/api/v1/vms", tok, map[string]any{"namespace": teamA, "name": "x", "cluster": "pve", "template": "9000", "cpus": "two"})
	g.Expect(r.Status).To(Equal(http.StatusBadRequest))
	g.Expect(r.problem(t).Errors[0].Field).To(Equal("cpus"))

	r = f.call(t, http.MethodGet, "/api/v1/jobs/nonsense", tok, nil)
	g.Expect(r.Status).To(Equal(http.StatusBadRequest))
	g.Expect(apierrors.IsNotFound(env.Client.Get(context.Background(), client.ObjectKey{Namespace: teamA, Name: "x"}, &infrav1.MachineClaim{}))).To(BeTrue())
}

// TestPoolsScaleThroughTheScaleSubresource: a pool is listed with its queue and scaled within its
// bounds; a size outside them is refused naming the field.
func TestPoolsScaleThroughTheScaleSubresource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := startConsole(t)
	pool := builder.NewRunnerPool("scale-me", teamA).WithCluster("fleet").WithBounds(1, 4).WithLabels("linux", "x64").Build()
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())
	pool.Status.QueuedJobs = 3
	g.Expect(env.Client.Status().Update(ctx, pool)).To(Succeed())
	tok := f.token(t, alice, fakeoidc.TokenOptions{})
	// The pool's job ledger: a job queued two minutes ago, another taken by a runner after 40s.
	ledger := &demand.Store{Client: env.Client}
	queuedAt := demand.WithObservedAt(ctx, time.Now().Add(-2*time.Minute))
	for _, ev := range []platform.JobEvent{{JobID: "1", State: platform.JobQueued}, {JobID: "2", State: platform.JobQueued}} {
		_, err := ledger.Record(queuedAt, pool, ev)
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err := ledger.Record(demand.WithObservedAt(ctx, time.Now().Add(-80*time.Second)), pool,
		platform.JobEvent{JobID: "2", State: platform.JobInProgress, RunnerName: "r1"})
	g.Expect(err).NotTo(HaveOccurred())

	r := f.call(t, http.MethodGet, "/api/v1/pools?namespace="+teamA, tok, nil)
	g.Expect(r.Status).To(Equal(http.StatusOK))
	var pools console.List[console.Pool]
	r.decode(t, &pools)
	g.Expect(pools.Items).To(ContainElement(And(HaveField("Name", "scale-me"), HaveField("QueuedJobs", int32(3)),
		HaveField("Labels", []string{"linux", "x64"}), HaveField("Platform", "github"),
		HaveField("OldestQueuedSeconds", HaveValue(BeNumerically("~", 120, 5))),
		HaveField("PickupMedianSeconds", HaveValue(BeNumerically("~", 40, 5))))))

	r = f.call(t, http.MethodPatch, "/api/v1/pools/"+teamA+"/scale-me", tok, map[string]any{"replicas": 9})
	g.Expect(r.Status).To(Equal(http.StatusUnprocessableEntity))
	g.Expect(r.problem(t).Errors[0].Field).To(Equal("replicas"))

	// The first size of a pool sized by demand, then a change through /scale.
	for _, n := range []int{3, 2} {
		r = f.call(t, http.MethodPatch, "/api/v1/pools/"+teamA+"/scale-me", tok, map[string]any{"replicas": n})
		g.Expect(r.Status).To(Equal(http.StatusOK), string(r.Body))
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
		g.Expect(pool.Spec.Replicas).To(HaveValue(Equal(int32(n))))
	}

	r = f.call(t, http.MethodPatch, "/api/v1/pools/"+teamB+"/anything", tok, map[string]any{"replicas": 1})
	g.Expect(r.Status).To(Equal(http.StatusForbidden))
}

// sseEvent is one server-sent event.
type sseEvent struct{ Event, Data string }

// streamLog reads a job's log until its end event, sending each event to events.
func (f *fixture) streamLog(t *testing.T, token, jobID string, timeout time.Duration) []sseEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.URL+"/api/v1/jobs/"+jobID+"/log", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("log of %s: %d %s", jobID, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var events []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Event != "" {
				events = append(events, cur)
				if cur.Event == "end" {
					return events
				}
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data += strings.TrimPrefix(line, "data: ")
		}
	}
	t.Fatalf("log of %s ended without an end event (%v); got %v", jobID, sc.Err(), events)
	return nil
}

// TestCreateAndDeleteVMThroughTheAPI: a VM created through the API becomes a running VM on the
// Proxmox VE simulator while its job log streams its progress; the hosts and VM inventory show it;
// deleting it removes the VM, again as a job.
func TestCreateAndDeleteVMThroughTheAPI(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t)
	hypervisorCluster(t, sim, teamA, "pve-api")
	f := startConsole(t)
	tok := f.token(t, alice, fakeoidc.TokenOptions{})

	g.Eventually(func(g Gomega) {
		r := f.call(t, http.MethodGet, "/api/v1/hosts?namespace="+teamA, tok, nil)
		g.Expect(r.Status).To(Equal(http.StatusOK))
		var hosts console.List[console.Host]
		r.decode(t, &hosts)
		g.Expect(hosts.Items).To(ContainElement(And(HaveField("Cluster", "pve-api"), HaveField("Name", "pve1"),
			HaveField("State", "Online"), HaveField("CPUs", 16), HaveField("MemoryMiB", uint64(65536)))))
	}, 30*time.Second, 250*time.Millisecond).Should(Succeed(), "the inventory reads the simulator's hosts")

	r := f.call(t, http.MethodPost, "/api/v1/vms", tok, console.CreateVMRequest{Namespace: teamA, Name: "api-vm", Cluster: "pve-api",
		Template: "9000", CPUs: 2, MemoryMiB: 1024, UserData: "#cloud-config\nhostname: api-vm\n"})
	g.Expect(r.Status).To(Equal(http.StatusAccepted), string(r.Body))
	var job console.Job
	r.decode(t, &job)
	g.Expect(job.ID).To(Equal("create:" + teamA + ":api-vm"))
	g.Expect(r.Header.Get("Location")).To(Equal("/api/v1/jobs/" + job.ID))

	events := f.streamLog(t, tok, job.ID, 2*time.Minute)
	g.Expect(events[len(events)-1]).To(Equal(sseEvent{Event: "end", Data: `{"state":"Succeeded"}`}))
	var log []string
	for _, e := range events[:len(events)-1] {
		g.Expect(e.Event).To(Equal("log"))
		log = append(log, e.Data)
	}
	t.Logf("job log:\n%s", strings.Join(log, "\n"))
	text := strings.Join(log, "\n")
	g.Expect(text).To(And(ContainSubstring("MachineClaim "+teamA+"/api-vm created"), ContainSubstring("Cloning: cloning ubuntu-2404-runner"),
		ContainSubstring("condition Ready=True"), ContainSubstring("power state Running")))

	claim := &infrav1.MachineClaim{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: teamA, Name: "api-vm"}, claim)).To(Succeed())
	vm, ok := sim.VM(vmidOf(claim.Status.VMID))
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Status).To(Equal("running"))
	g.Expect(vm.Cores).To(Equal(2))

	g.Eventually(func(g Gomega) {
		r := f.call(t, http.MethodGet, "/api/v1/vms?cluster=pve-api&state=Running", tok, nil)
		var vms console.List[console.VM]
		r.decode(t, &vms)
		g.Expect(vms.Items).To(ContainElement(And(HaveField("Name", "api-vm"), HaveField("PowerState", "Running"),
			HaveField("Host", claim.Status.Node), HaveField("Phase", "Ready"))))
	}, 10*time.Second, 250*time.Millisecond).Should(Succeed())

	// The cluster's other VMs are shown too, read-only.
	g.Eventually(func(g Gomega) {
		r := f.call(t, http.MethodGet, "/api/v1/vms?cluster=pve-api", tok, nil)
		var vms console.List[console.VM]
		r.decode(t, &vms)
		g.Expect(vms.Items).To(ContainElement(And(HaveField("Name", "gitlab"), HaveField("Foreign", true),
			HaveField("Namespace", teamA), HaveField("PowerState", "Running"), HaveField("Host", "pve2"))))
		g.Expect(vms.Items).To(ContainElement(And(HaveField("Name", "api-vm"), HaveField("Foreign", false))))
	}, 10*time.Second, 250*time.Millisecond).Should(Succeed())
	r = f.call(t, http.MethodDelete, "/api/v1/vms/"+teamA+"/gitlab", tok, nil)
	g.Expect(r.Status).To(Equal(http.StatusNotFound), "a foreign VM has no claim to delete")

	// A restarted console knows the job: it is derived from the claim.
	f2 := startConsole(t)
	r = f2.call(t, http.MethodGet, "/api/v1/jobs/"+job.ID, f2.token(t, alice, fakeoidc.TokenOptions{}), nil)
	g.Expect(r.Status).To(Equal(http.StatusOK))
	r.decode(t, &job)
	g.Expect(job.State).To(Equal(console.JobSucceeded))

	r = f.call(t, http.MethodDelete, "/api/v1/vms/"+teamA+"/api-vm", tok, nil)
	g.Expect(r.Status).To(Equal(http.StatusAccepted), string(r.Body))
	r.decode(t, &job)
	g.Expect(job.ID).To(Equal("delete:" + teamA + ":api-vm"))
	events = f.streamLog(t, tok, job.ID, 2*time.Minute)
	g.Expect(events[len(events)-1]).To(Equal(sseEvent{Event: "end", Data: `{"state":"Succeeded"}`}))
	_, exists := sim.VM(vmidOf(claim.Status.VMID))
	g.Expect(exists).To(BeFalse(), "the VM is gone from the hypervisor")

	if dir := os.Getenv("CONSOLE_ARTIFACTS"); dir != "" {
		_ = os.WriteFile(filepath.Join(dir, "api-job-log.txt"), []byte(text), 0o644)
	}
}

// TestPowerControlOfPersistentVMs: a persistent VM is turned off and on through its claim, as
// KubeVirt's virtctl does (a power request for Manual, the run strategy otherwise); an ephemeral
// runner VM has no power control.
func TestPowerControlOfPersistentVMs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := startConsole(t)
	tok := f.token(t, alice, fakeoidc.TokenOptions{})
	claim := func(name string, lifecycle infrav1.Lifecycle, strategy infrav1.RunStrategy) *infrav1.MachineClaim {
		c := builder.NewMachineClaim(name, teamA).WithTemplate(infrav1.TemplateSource{ID: "9000"}).
			WithHypervisorCluster("pve").WithBootstrapSecret(name + "-user-data").Build()
		c.Spec.Lifecycle, c.Spec.RunStrategy = lifecycle, strategy
		g.Expect(env.Client.Create(ctx, c)).To(Succeed())
		return c
	}
	always := claim("power-always", infrav1.LifecyclePersistent, infrav1.RunStrategyAlways)
	manual := claim("power-manual", infrav1.LifecyclePersistent, infrav1.RunStrategyManual)
	runner := claim("power-runner", infrav1.LifecycleEphemeral, "")

	r := f.call(t, http.MethodPost, "/api/v1/vms/"+teamA+"/power-always/power-off", tok, nil)
	g.Expect(r.Status).To(Equal(http.StatusAccepted), string(r.Body))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(always), always)).To(Succeed())
	g.Expect(always.Spec.RunStrategy).To(Equal(infrav1.RunStrategyHalted))
	r = f.call(t, http.MethodPost, "/api/v1/vms/"+teamA+"/power-always/power-on", tok, nil)
	g.Expect(r.Status).To(Equal(http.StatusAccepted), string(r.Body))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(always), always)).To(Succeed())
	g.Expect(always.Spec.RunStrategy).To(Equal(infrav1.RunStrategyAlways))

	r = f.call(t, http.MethodPost, "/api/v1/vms/"+teamA+"/power-manual/power-off", tok, nil)
	g.Expect(r.Status).To(Equal(http.StatusAccepted), string(r.Body))
	var job console.Job
	r.decode(t, &job)
	g.Expect(job.ID).To(Equal("power-off:" + teamA + ":power-manual"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(manual), manual)).To(Succeed())
	g.Expect(manual.Annotations).To(HaveKeyWithValue(infrav1.PowerRequestAnnotation, infrav1.PowerRequestStop))
	g.Expect(manual.Spec.RunStrategy).To(Equal(infrav1.RunStrategyManual))

	r = f.call(t, http.MethodPost, "/api/v1/vms/"+teamA+"/power-runner/power-off", tok, nil)
	g.Expect(r.Status).To(Equal(http.StatusConflict))
	g.Expect(r.problem(t).Detail).To(ContainSubstring("not Persistent"))
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(runner), runner)).To(Succeed())
	g.Expect(runner.Annotations).NotTo(HaveKey(infrav1.PowerRequestAnnotation))
}

// TestShutdownEndsLogStreams: a console shutting down does not wait for job logs that stream for
// minutes; their connections close without an end event, so browsers reconnect to the next console.
func TestShutdownEndsLogStreams(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := startConsole(t)
	tok := f.token(t, alice, fakeoidc.TokenOptions{})
	// No HypervisorCluster of that name: the claim stays Pending and its job runs.
	c := builder.NewMachineClaim("never-ready", teamA).WithTemplate(infrav1.TemplateSource{ID: "9000"}).
		WithHypervisorCluster("nowhere").WithBootstrapSecret("never-ready-user-data").Build()
	g.Expect(env.Client.Create(ctx, c)).To(Succeed())

	req, _ := http.NewRequest(http.MethodGet, f.URL+"/api/v1/jobs/create:"+teamA+":never-ready/log", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	sc := bufio.NewScanner(resp.Body)
	g.Expect(sc.Scan()).To(BeTrue(), "the stream has begun")

	start := time.Now()
	f.stop()
	g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "shutdown did not wait for the stream")
	var rest []string
	for sc.Scan() {
		rest = append(rest, sc.Text())
	}
	g.Expect(strings.Join(rest, "\n")).NotTo(ContainSubstring("event: end"))
}
