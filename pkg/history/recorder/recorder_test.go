package recorder_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/history/recorder"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
)

// flaky is a store that fails every call while down, as a database being restarted does.
type flaky struct {
	history.Store
	down  atomic.Bool
	calls atomic.Int64
}

var errDown = errors.New("connection refused")

func (f *flaky) check() error {
	f.calls.Add(1)
	if f.down.Load() {
		return errDown
	}
	return nil
}

func (f *flaky) UpsertJob(ctx context.Context, r history.JobRecord) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Store.UpsertJob(ctx, r)
}

func (f *flaky) UpsertRunner(ctx context.Context, ns, runner string, facts history.JobRecord) (string, error) {
	if err := f.check(); err != nil {
		return "", err
	}
	return f.Store.UpsertRunner(ctx, ns, runner, facts)
}

func (f *flaky) AppendAudit(ctx context.Context, e history.AuditEntry) (int64, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	return f.Store.AppendAudit(ctx, e)
}

func (f *flaky) Job(ctx context.Context, id string) (history.JobRecord, error) {
	if err := f.check(); err != nil {
		return history.JobRecord{}, err
	}
	return f.Store.Job(ctx, id)
}

func (f *flaky) Close() error { return nil }

func newStore(t testing.TB) *flaky {
	s, err := history.OpenSQLite(filepath.Join(t.TempDir(), "history.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &flaky{Store: s}
}

func newSigner(t testing.TB) *provenance.Signer {
	key, err := provenance.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	s, err := provenance.NewSigner(key)
	if err != nil {
		t.Fatal(err)
	}
	return &s
}

func recorderOptions(t testing.TB) recorder.Options { return recorder.Options{Signer: newSigner(t)} }

func start(t testing.TB, store history.Store, opts recorder.Options) *recorder.Recorder {
	opts.Open = func(context.Context) (history.Store, error) { return store, nil }
	opts.Log = logr.Discard()
	r := recorder.New(opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func pool(kind string) *fleetv1.RunnerPool {
	p := &fleetv1.RunnerPool{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "linux"}}
	switch kind {
	case "github":
		p.Spec.Platform.GitHub = &fleetv1.GitHubSpec{}
	case "gitlab":
		p.Spec.Platform.GitLab = &fleetv1.GitLabSpec{}
	}
	return p
}

// A job's story arrives in pieces from the ledger and from its runner's VM, in the order they
// happen (VM facts before the job names the runner); once the job has finished and the VM is gone
// the record is sealed, and the seal verifies under the installation's key alone.
func TestRecordAssembledFromPiecesIsSealedAndVerifies(t *testing.T) {
	g := NewWithT(t)
	store := newStore(t)
	signer := newSigner(t)
	r := start(t, store, recorder.Options{Signer: signer})
	p := pool("github")
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	r.ObserveJob(context.Background(), p, platform.JobEvent{JobID: "4711", State: platform.JobQueued, Repository: "acme/api",
		Labels: []string{"self-hosted", "linux"}, CreatedAt: at(0)}, at(time.Second))
	r.Runner("team-a", "linux-x7", history.JobRecord{VM: history.VMRef{Provider: "proxmox", HypervisorCluster: "pve", Host: "node1", VMID: "4101", Name: "linux-x7"},
		Template: history.TemplateRef{Name: "ubuntu", ID: "9000"}, Times: history.JobTimes{VMRequested: ptr(at(2 * time.Second)), Cloned: ptr(at(10 * time.Second))}})
	r.Runner("team-a", "linux-x7", history.JobRecord{Identity: history.Identity{SPIFFEID: "spiffe://fleet/ns/team-a/machine/linux-x7", SVIDSerial: "0a"},
		Times: history.JobTimes{Booted: ptr(at(30 * time.Second)), Attested: ptr(at(40 * time.Second))}})
	r.ObserveJob(context.Background(), p, platform.JobEvent{JobID: "4711", State: platform.JobInProgress, RunnerName: "linux-x7",
		StartedAt: at(45 * time.Second)}, at(46*time.Second))
	r.ObserveJob(context.Background(), p, platform.JobEvent{JobID: "4711", State: platform.JobCompleted, RunnerName: "linux-x7",
		Conclusion: "failure", CompletedAt: at(5 * time.Minute)}, at(5*time.Minute))
	g.Eventually(func() int { return r.Health().Pending }).Should(BeZero())
	rec, err := store.Job(context.Background(), "github/4711")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.Sealed()).To(BeFalse(), "the VM is not gone yet")

	r.Runner("team-a", "linux-x7", history.JobRecord{Times: history.JobTimes{VMDestroyed: ptr(at(6 * time.Minute))}})
	g.Eventually(func() bool {
		rec, err = store.Job(context.Background(), "github/4711")
		return err == nil && rec.Sealed()
	}).Should(BeTrue())
	g.Expect(rec.Outcome).To(Equal(history.OutcomeFailed))
	g.Expect(rec.FailureReason).To(Equal("the platform reported failure"))
	g.Expect(rec.VM.Host).To(Equal("node1"))
	g.Expect(rec.Identity.SVIDSerial).To(Equal("0a"))
	g.Expect(*rec.Times.Queued).To(Equal(at(0)), "the platform's creation time")
	g.Expect(*rec.Times.JobStarted).To(Equal(at(45 * time.Second)))

	var env provenance.Envelope
	g.Expect(json.Unmarshal(rec.Envelope, &env)).To(Succeed())
	st, err := provenance.Verify(env, signer.Public())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Subject[0].Name).To(Equal("github/4711"))
	var signed history.JobRecord
	g.Expect(json.Unmarshal(st.Predicate, &signed)).To(Succeed())
	g.Expect(signed).To(Equal(recorder.Signed(rec)), "the signature covers the record as stored")

	// A repeated completed delivery after the seal changes nothing and does not stall the queue.
	r.ObserveJob(context.Background(), p, platform.JobEvent{JobID: "4711", State: platform.JobCompleted, Conclusion: "success"}, at(7*time.Minute))
	r.Audit(history.AuditEntry{Actor: history.Actor{Subject: "hyperfleet-manager", Kind: history.ActorController}, Action: "destroy-vm",
		Object: history.ObjectRef{Kind: "MachineClaim", Namespace: "team-a", Name: "linux-x7"}, Result: history.ResultOK})
	g.Eventually(func() int { return r.Health().Pending }).Should(BeZero())
	after, err := store.Job(context.Background(), "github/4711")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Outcome).To(Equal(history.OutcomeFailed))
	entries, err := store.Audit(context.Background(), history.AuditQuery{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1))
}

// A store outage in the middle of a burst delays records and loses none: every piece queued while
// the store was down is written, in order, once it is back; the health says so meanwhile; and
// nobody who records waits for the store.
func TestOutageDelaysRecordsAndLosesNone(t *testing.T) {
	g := NewWithT(t)
	store := newStore(t)
	r := start(t, store, recorder.Options{Signer: newSigner(t)})
	p := pool("gitlab")
	const jobs = 200
	record := func(from, to int) {
		for i := from; i < to; i++ {
			id := fmt.Sprint(i)
			r.ObserveJob(context.Background(), p, platform.JobEvent{JobID: id, State: platform.JobQueued, CreatedAt: t0}, t0)
			r.ObserveJob(context.Background(), p, platform.JobEvent{JobID: id, State: platform.JobInProgress, RunnerName: "r" + id}, t0.Add(time.Second))
			r.ObserveJob(context.Background(), p, platform.JobEvent{JobID: id, State: platform.JobCompleted, RunnerName: "r" + id, Conclusion: "success"}, t0.Add(time.Minute))
			r.Runner("team-a", "r"+id, history.JobRecord{Times: history.JobTimes{VMDestroyed: ptr(t0.Add(2 * time.Minute))}})
			r.Audit(history.AuditEntry{Actor: history.Actor{Subject: "hyperfleet-manager", Kind: history.ActorController}, Action: "destroy-vm",
				Object: history.ObjectRef{Kind: "MachineClaim", Namespace: "team-a", Name: "r" + id}, Result: history.ResultOK})
		}
	}
	record(0, jobs/2)
	store.down.Store(true)
	began := time.Now()
	record(jobs/2, jobs)
	g.Expect(time.Since(began)).To(BeNumerically("<", time.Second), "recording never waits for the store")
	g.Eventually(func() bool { return r.Health().Failing }).Should(BeTrue())
	h := r.Health()
	g.Expect(h.Pending).To(BeNumerically(">", 0))
	g.Expect(h.LastError).To(ContainSubstring("connection refused"))
	store.down.Store(false)

	g.Eventually(func() int { return r.Health().Pending }, 30*time.Second).Should(BeZero())
	g.Expect(r.Health().Failing).To(BeFalse())
	g.Expect(r.Health().Dropped).To(BeZero())
	for i := range jobs {
		rec, err := store.Job(context.Background(), fmt.Sprintf("gitlab/%d", i))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rec.Sealed()).To(BeTrue(), "job %d", i)
		g.Expect(rec.Outcome).To(Equal(history.OutcomeSucceeded))
	}
	entries, err := store.Audit(context.Background(), history.AuditQuery{Limit: history.MaxLimit})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(jobs))
	for i, e := range entries { // newest first: written in the order recorded
		g.Expect(e.Object.Name).To(Equal(fmt.Sprintf("r%d", jobs-1-i)))
	}
}

// Beyond MaxPending pieces the newest are dropped and counted; nothing blocks.
func TestFullQueueDropsAndCounts(t *testing.T) {
	g := NewWithT(t)
	store := newStore(t)
	store.down.Store(true)
	r := start(t, store, recorder.Options{MaxPending: 10})
	for i := range 25 {
		r.Audit(history.AuditEntry{Actor: history.Actor{Subject: "a", Kind: history.ActorController}, Action: "x",
			Object: history.ObjectRef{Kind: "MachineClaim", Name: fmt.Sprint(i)}})
	}
	h := r.Health()
	g.Expect(h.Pending).To(Equal(10))
	g.Expect(h.Dropped).To(BeEquivalentTo(15))
	store.down.Store(false)
	g.Eventually(func() int { return r.Health().Pending }, 30*time.Second).Should(BeZero())
}

// Without a key, finished records are kept, unsealed.
func TestNoSignerKeepsRecordsUnsealed(t *testing.T) {
	g := NewWithT(t)
	store := newStore(t)
	r := start(t, store, recorder.Options{})
	r.Job(history.JobRecord{Platform: "buildkite", JobID: "j", Namespace: "n", Outcome: history.OutcomeSucceeded,
		Times: history.JobTimes{JobFinished: ptr(t0), VMDestroyed: ptr(t0)}})
	g.Eventually(func() uint64 { return r.Health().Written }).Should(BeEquivalentTo(1))
	rec, err := store.Job(context.Background(), "buildkite/j")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.Sealed()).To(BeFalse())
}

// Many goroutines recording at once lose nothing.
func TestConcurrentRecordersLoseNothing(t *testing.T) {
	g := NewWithT(t)
	store := newStore(t)
	r := start(t, store, recorder.Options{})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 50 {
				r.Job(history.JobRecord{Platform: "github", JobID: fmt.Sprintf("%d-%d", w, i), Namespace: "n", Times: history.JobTimes{Queued: ptr(t0)}})
			}
		})
	}
	wg.Wait()
	g.Eventually(func() uint64 { return r.Health().Written }, 30*time.Second).Should(BeEquivalentTo(400))
	all, err := store.Jobs(context.Background(), history.JobQuery{Limit: history.MaxLimit})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all).To(HaveLen(400))
}

// A job's URL comes from a delivery: only an http(s) address is kept, since it is shown as a link.
func TestJobURLIsKeptOnlyWhenItIsAWebAddress(t *testing.T) {
	g := NewWithT(t)
	for raw, want := range map[string]string{
		"https://github.com/acme/api/actions/runs/1/job/2": "https://github.com/acme/api/actions/runs/1/job/2",
		"http://gitlab.local/g/p/-/jobs/3":                 "http://gitlab.local/g/p/-/jobs/3",
		"javascript:alert(1)":                              "",
		"data:text/html,<script>":                          "",
		"//evil.example/x":                                 "",
		"":                                                 "",
	} {
		rec := recorder.FromJobEvent(pool("github"), platform.JobEvent{JobID: "1", State: platform.JobQueued, URL: raw}, t0)
		g.Expect(rec.JobURL).To(Equal(want), raw)
	}
}

func TestOutcomes(t *testing.T) {
	g := NewWithT(t)
	for conclusion, want := range map[string]history.Outcome{
		"success": history.OutcomeSucceeded, "passed": history.OutcomeSucceeded, "failure": history.OutcomeFailed,
		"timed_out": history.OutcomeFailed, "cancelled": history.OutcomeCancelled, "canceled": history.OutcomeCancelled,
		"skipped": history.OutcomeCancelled, "neutral": history.OutcomeUnknown, "": history.OutcomeUnknown,
	} {
		got, reason := recorder.Outcome(conclusion)
		g.Expect(got).To(Equal(want), conclusion)
		g.Expect(reason == "").To(Equal(want == history.OutcomeSucceeded), conclusion)
	}
}

func ptr[T any](v T) *T { return &v }

// Retention prunes what is older, a minute after start and then daily; the key is fetched when
// the first record is sealed.
func TestRetentionPrunesAndKeyIsFetchedWhenNeeded(t *testing.T) {
	g := NewWithT(t)
	store := newStore(t)
	old := time.Now().Add(-100 * 24 * time.Hour)
	g.Expect(store.AppendAudit(context.Background(), history.AuditEntry{Time: old, Actor: history.Actor{Subject: "a", Kind: history.ActorPerson},
		Action: "x", Object: history.ObjectRef{Kind: "MachineClaim", Name: "old"}})).Error().NotTo(HaveOccurred())
	clock := &fakeClock{now: time.Now()}
	signer := newSigner(t)
	var fetched atomic.Int32
	r := start(t, store, recorder.Options{Retention: 90 * 24 * time.Hour, Now: clock.Now,
		Key: func(context.Context) (provenance.Signer, error) {
			if fetched.Add(1) <= 3 {
				return provenance.Signer{}, errors.New("secret not readable yet")
			}
			return *signer, nil
		}})
	r.Job(history.JobRecord{Platform: "github", JobID: "1", Namespace: "n", Outcome: history.OutcomeSucceeded,
		Times: history.JobTimes{JobFinished: ptr(time.Now()), VMDestroyed: ptr(time.Now())}})
	r.Job(history.JobRecord{Platform: "github", JobID: "2", Namespace: "n"})
	g.Eventually(func() error {
		_, err := store.Job(context.Background(), "github/2")
		return err
	}, 10*time.Second).Should(Succeed(), "a record waiting for the key holds up none behind it")
	g.Eventually(func() bool {
		rec, err := store.Job(context.Background(), "github/1")
		return err == nil && rec.Sealed()
	}, 10*time.Second).Should(BeTrue(), "a key that could not be read at first is read again")
	g.Expect(fetched.Load()).To(BeEquivalentTo(4))

	clock.advance(2 * time.Minute)
	r.Audit(history.AuditEntry{Actor: history.Actor{Subject: "a", Kind: history.ActorPerson}, Action: "y",
		Object: history.ObjectRef{Kind: "MachineClaim", Name: "new"}})
	g.Eventually(func() []string {
		entries, _ := store.Audit(context.Background(), history.AuditQuery{})
		var names []string
		for _, e := range entries {
			names = append(names, e.Object.Name)
		}
		return names
	}, 10*time.Second).Should(Equal([]string{"new"}))
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// A job whose completion never reaches HyperFleet (a lost webhook) still gets a record that ends:
// once its VM has been gone UnfinishedAfter, the sweep closes it as unknown, says why, and seals
// it. A job whose completion arrives in time keeps its outcome; one still within the grace is
// left open; a completion arriving after the close changes nothing.
func TestJobWhoseCompletionNeverCameIsClosedAsUnknown(t *testing.T) {
	g := NewWithT(t)
	store := newStore(t)
	signer := newSigner(t)
	var now atomic.Pointer[time.Time]
	setNow := func(d time.Duration) { n := t0.Add(d); now.Store(&n) }
	setNow(0)
	const grace = 200 * time.Millisecond // the sweep runs every 50 ms of wall time
	r := start(t, store, recorder.Options{Signer: signer, UnfinishedAfter: grace, Now: func() time.Time { return *now.Load() }})
	p := pool("github")
	for _, id := range []string{"lost", "in-time"} {
		r.ObserveJob(context.Background(), p, platform.JobEvent{JobID: id, State: platform.JobQueued, CreatedAt: t0}, t0)
		r.ObserveJob(context.Background(), p, platform.JobEvent{JobID: id, State: platform.JobInProgress, RunnerName: "r-" + id}, t0)
		r.Runner("team-a", "r-"+id, history.JobRecord{Times: history.JobTimes{VMDestroyed: ptr(t0)}})
	}
	r.ObserveJob(context.Background(), p, platform.JobEvent{JobID: "in-time", State: platform.JobCompleted, RunnerName: "r-in-time",
		Conclusion: "success", CompletedAt: t0.Add(100 * time.Millisecond)}, t0.Add(100*time.Millisecond))
	setNow(100 * time.Millisecond)
	g.Eventually(func() int { return r.Health().Pending }).Should(BeZero())

	g.Consistently(func(g Gomega) {
		rec, err := store.Job(context.Background(), "github/lost")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rec.Outcome).To(BeEmpty())
		g.Expect(rec.Sealed()).To(BeFalse())
	}, 300*time.Millisecond, 20*time.Millisecond).Should(Succeed(), "within the grace the job may still report")

	setNow(time.Second)
	var rec history.JobRecord
	g.Eventually(func(g Gomega) {
		var err error
		rec, err = store.Job(context.Background(), "github/lost")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rec.Sealed()).To(BeTrue())
	}, 10*time.Second, 20*time.Millisecond).Should(Succeed(), "past the grace the sweep closes and seals the record")
	g.Expect(rec.Outcome).To(Equal(history.OutcomeUnknown))
	g.Expect(rec.FailureReason).To(Equal("no completion of the job reached HyperFleet within 200ms of its VM's destruction"))
	g.Expect(rec.Times.JobFinished).To(BeNil(), "nobody knows when it finished")
	var env provenance.Envelope
	g.Expect(json.Unmarshal(rec.Envelope, &env)).To(Succeed())
	_, err := provenance.Verify(env, signer.Public())
	g.Expect(err).NotTo(HaveOccurred())

	inTime, err := store.Job(context.Background(), "github/in-time")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inTime.Sealed()).To(BeTrue())
	g.Expect(inTime.Outcome).To(Equal(history.OutcomeSucceeded), "a completion that came in time is what the record says")

	r.ObserveJob(context.Background(), p, platform.JobEvent{JobID: "lost", State: platform.JobCompleted, RunnerName: "r-lost", Conclusion: "success"}, t0.Add(2*time.Second))
	g.Eventually(func() int { return r.Health().Pending }).Should(BeZero())
	after, err := store.Job(context.Background(), "github/lost")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.Outcome).To(Equal(history.OutcomeUnknown), "the sealed record stands")
}
