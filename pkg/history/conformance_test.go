package history

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// t0 is the start of the suite's made-up history.
var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time {
	t := t0.Add(d)
	return &t
}

// runConformance is what every backend must do alike.
func runConformance(t *testing.T, b backend) {
	open := func(t *testing.T) (*sqlStore, string) {
		t.Helper()
		where := b.newDatabase(t)
		s, err := b.open(context.Background(), where, nil)
		if err != nil {
			t.Fatalf("opening a new %s store: %v", b.d.name, err)
		}
		t.Cleanup(func() { s.Close() })
		return s.(*sqlStore), where
	}
	t.Run("UpsertPieceByPiece", func(t *testing.T) { testUpsertPieceByPiece(t, open) })
	t.Run("RunnerFacts", func(t *testing.T) { testRunnerFacts(t, open) })
	t.Run("Sealing", func(t *testing.T) { testSealing(t, b, open) })
	t.Run("FiltersAndPaging", func(t *testing.T) { testFiltersAndPaging(t, open) })
	t.Run("ConcurrentUpserts", func(t *testing.T) { testConcurrentUpserts(t, open) })
	t.Run("Audit", func(t *testing.T) { testAudit(t, open) })
	t.Run("AuditAppendOnly", func(t *testing.T) { testAuditAppendOnly(t, b, open) })
	t.Run("Percentiles", func(t *testing.T) { testPercentiles(t, open) })
	t.Run("Prune", func(t *testing.T) { testPrune(t, open) })
	t.Run("Unfinished", func(t *testing.T) { testUnfinished(t, open) })
	t.Run("Migrations", func(t *testing.T) { testMigrations(t, b) })
}

type opener func(t *testing.T) (*sqlStore, string)

// testUpsertPieceByPiece: recorders write what they learn in any order; the record read back is
// the sum of the pieces, and a later piece never clears what an earlier one said.
func testUpsertPieceByPiece(t *testing.T, open opener) {
	g := NewWithT(t)
	ctx := context.Background()
	s, _ := open(t)
	berlin := time.FixedZone("CET", 3600)
	pieces := []JobRecord{
		{Platform: "github", JobID: "7", Namespace: "team-a", Pool: "linux", Repository: "acme/api",
			Labels: []string{"self-hosted", "linux"}, JobURL: "https://ci.example/acme/api/7", Times: JobTimes{Queued: at(0)}},
		{ID: "github/7", Times: JobTimes{JobFinished: at(5 * time.Minute)}, Outcome: OutcomeFailed, FailureReason: "exit 1"},
		{ID: "github/7", VM: VMRef{Provider: "proxmox", HypervisorCluster: "pve", Host: "node1", VMID: "4101", Name: "linux-x7"},
			Template: TemplateRef{Name: "ubuntu", ID: "9000", Digest: "sha256:abc"}, Times: JobTimes{VMRequested: at(time.Second)}},
		{ID: "github/7", Runner: "linux-x7", Times: JobTimes{JobStarted: ptr(t0.Add(time.Minute + 1500*time.Nanosecond).In(berlin))}},
		{ID: "github/7", Identity: Identity{SPIFFEID: "spiffe://fleet/vm/4101", SVIDSerial: "01", SVIDFingerprint: "fp", TPMEKHash: "ek"},
			Times: JobTimes{Cloned: at(10 * time.Second), Booted: at(30 * time.Second), Attested: at(40 * time.Second)}},
		{ID: "github/7", Namespace: "", Times: JobTimes{VMDestroyed: at(6 * time.Minute)}},
	}
	for _, p := range pieces {
		g.Expect(s.UpsertJob(ctx, p)).To(Succeed())
	}
	got, err := s.Job(ctx, "github/7")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.UpdatedAt).NotTo(BeZero())
	got.UpdatedAt = time.Time{}
	g.Expect(got).To(Equal(JobRecord{
		ID: "github/7", Namespace: "team-a", Pool: "linux", Platform: "github", JobID: "7", JobURL: "https://ci.example/acme/api/7",
		Repository: "acme/api", Labels: []string{"self-hosted", "linux"}, Runner: "linux-x7",
		VM:       VMRef{Provider: "proxmox", HypervisorCluster: "pve", Host: "node1", VMID: "4101", Name: "linux-x7"},
		Template: TemplateRef{Name: "ubuntu", ID: "9000", Digest: "sha256:abc"},
		Identity: Identity{SPIFFEID: "spiffe://fleet/vm/4101", SVIDSerial: "01", SVIDFingerprint: "fp", TPMEKHash: "ek"},
		Times: JobTimes{Queued: at(0), VMRequested: at(time.Second), Cloned: at(10 * time.Second), Booted: at(30 * time.Second),
			Attested: at(40 * time.Second), JobStarted: at(time.Minute + time.Microsecond), JobFinished: at(5 * time.Minute),
			VMDestroyed: at(6 * time.Minute)},
		Outcome: OutcomeFailed, FailureReason: "exit 1",
	}), "times come back in UTC, to the microsecond")

	_, err = s.Job(ctx, "github/8")
	g.Expect(err).To(MatchError(ErrNotFound))
	g.Expect(s.UpsertJob(ctx, JobRecord{Namespace: "team-a"})).To(MatchError(ErrInvalid), "a record needs an ID")
	g.Expect(s.UpsertJob(ctx, JobRecord{ID: "github/7", Outcome: "exploded"})).To(MatchError(ErrInvalid))
}

func ptr[T any](v T) *T { return &v }

// testUnfinished: the records no completion reached are the unsealed ones without an outcome or
// a finish time whose VM is gone, and only once it has been gone long enough.
func testUnfinished(t *testing.T, open opener) {
	g := NewWithT(t)
	ctx := context.Background()
	s, _ := open(t)
	for _, r := range []JobRecord{
		{Platform: "github", JobID: "lost", Times: JobTimes{Queued: at(0), VMDestroyed: at(10 * time.Minute)}},
		{Platform: "github", JobID: "lost-earlier", Times: JobTimes{Queued: at(0), VMDestroyed: at(5 * time.Minute)}},
		{Platform: "github", JobID: "lost-lately", Times: JobTimes{Queued: at(0), VMDestroyed: at(time.Hour)}},
		{Platform: "github", JobID: "running", Times: JobTimes{Queued: at(0), JobStarted: at(time.Minute)}},
		{Platform: "github", JobID: "finished", Times: JobTimes{Queued: at(0), JobFinished: at(2 * time.Minute), VMDestroyed: at(3 * time.Minute)}},
		{Platform: "gitlab", JobID: "cancelled", Outcome: OutcomeCancelled, Times: JobTimes{Queued: at(0), VMDestroyed: at(3 * time.Minute)}},
		{Platform: "buildkite", JobID: "sealed", Times: JobTimes{Queued: at(0), VMDestroyed: at(3 * time.Minute)}, Envelope: []byte(`{}`)},
	} {
		g.Expect(s.UpsertJob(ctx, r)).To(Succeed())
	}
	ids, err := s.Unfinished(ctx, t0.Add(30*time.Minute), 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids).To(Equal([]string{"github/lost-earlier", "github/lost"}), "oldest destruction first; nothing finished, sealed or too recent")
	ids, err = s.Unfinished(ctx, t0.Add(2*time.Hour), 1)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids).To(Equal([]string{"github/lost-earlier"}), "at most limit")
	ids, err = s.Unfinished(ctx, t0.Add(time.Minute), 0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids).To(BeEmpty())
}

// testRunnerFacts: what is learned about a runner's VM before its job is known (cloned, booted,
// attested) joins the job's record once a piece of the job names the runner, and what is learned
// after (destroyed) goes straight to the job's record; job fields in runner facts are ignored, a
// runner of another namespace never lends its facts, and a sealed record keeps out later facts.
func testRunnerFacts(t *testing.T, open opener) {
	g := NewWithT(t)
	ctx := context.Background()
	s, _ := open(t)
	vm := VMRef{Provider: "proxmox", HypervisorCluster: "pve", Host: "node1", VMID: "4101", Name: "linux-x7"}
	id, err := s.UpsertRunner(ctx, "team-a", "linux-x7", JobRecord{VM: vm, Template: TemplateRef{Name: "ubuntu", ID: "9000"},
		Times: JobTimes{VMRequested: at(0), Cloned: at(10 * time.Second)}, Outcome: OutcomeFailed, Pool: "forged", JobID: "forged"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(BeEmpty(), "no job names the runner yet")
	id, err = s.UpsertRunner(ctx, "team-a", "linux-x7", JobRecord{Identity: Identity{SPIFFEID: "spiffe://fleet/vm/4101"},
		Times: JobTimes{Booted: at(30 * time.Second), Attested: at(40 * time.Second)}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(BeEmpty())
	_, err = s.UpsertRunner(ctx, "team-b", "linux-x7", JobRecord{VM: VMRef{Host: "elsewhere"}})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(s.UpsertJob(ctx, JobRecord{Platform: "github", JobID: "7", Namespace: "team-a", Pool: "linux",
		Times: JobTimes{Queued: at(20 * time.Second)}})).To(Succeed())
	g.Expect(s.UpsertJob(ctx, JobRecord{ID: "github/7", Runner: "linux-x7", Times: JobTimes{JobStarted: at(time.Minute)}})).To(Succeed())
	got, err := s.Job(ctx, "github/7")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.VM).To(Equal(vm))
	g.Expect(got.Template.ID).To(Equal("9000"))
	g.Expect(got.Identity.SPIFFEID).To(Equal("spiffe://fleet/vm/4101"))
	g.Expect(got.Times.Cloned).To(Equal(at(10 * time.Second)))
	g.Expect(got.Times.Attested).To(Equal(at(40 * time.Second)))
	g.Expect(got.Pool).To(Equal("linux"), "runner facts carry no job fields")
	g.Expect(got.JobID).To(Equal("7"))
	g.Expect(got.Outcome).To(BeEmpty())

	id, err = s.UpsertRunner(ctx, "team-a", "linux-x7", JobRecord{Times: JobTimes{VMDestroyed: at(6 * time.Minute)}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(Equal("github/7"))
	got, err = s.Job(ctx, "github/7")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Times.VMDestroyed).To(Equal(at(6 * time.Minute)))

	g.Expect(s.UpsertJob(ctx, JobRecord{ID: "github/7", Outcome: OutcomeSucceeded, Envelope: []byte(`{"payloadType":"x"}`)})).To(Succeed())
	id, err = s.UpsertRunner(ctx, "team-a", "linux-x7", JobRecord{VM: VMRef{Host: "node9"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(BeEmpty(), "a sealed record takes no facts")
	after, err := s.Job(ctx, "github/7")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after.VM.Host).To(Equal("node1"))

	_, err = s.UpsertRunner(ctx, "", "linux-x7", JobRecord{})
	g.Expect(err).To(MatchError(ErrInvalid))
}

// testSealing: once a record carries its envelope no upsert changes it, and neither does a raw
// UPDATE beside the store.
func testSealing(t *testing.T, b backend, open opener) {
	g := NewWithT(t)
	ctx := context.Background()
	s, where := open(t)
	g.Expect(s.UpsertJob(ctx, JobRecord{ID: "gitlab/1", Namespace: "ns", Times: JobTimes{Queued: at(0)}})).To(Succeed())
	g.Expect(s.UpsertJob(ctx, JobRecord{ID: "gitlab/1", Outcome: OutcomeSucceeded, Envelope: []byte(`{"payloadType":"x"}`)})).To(Succeed())
	sealed, err := s.Job(ctx, "gitlab/1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sealed.Sealed()).To(BeTrue())
	g.Expect(sealed.Outcome).To(Equal(OutcomeSucceeded), "the sealing upsert merges like any other")

	err = s.UpsertJob(ctx, JobRecord{ID: "gitlab/1", Outcome: OutcomeFailed})
	g.Expect(err).To(MatchError(ErrSealed))
	err = s.UpsertJob(ctx, JobRecord{ID: "gitlab/1", Envelope: []byte("another")})
	g.Expect(err).To(MatchError(ErrSealed))
	err = b.raw(t, where)("UPDATE jobs SET outcome = 'failed' WHERE id = 'gitlab/1'")
	g.Expect(err).To(MatchError(ContainSubstring("sealed")))
	after, err := s.Job(ctx, "gitlab/1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(Equal(sealed))
}

// testFiltersAndPaging: every filter, and pages that together list each record once, newest first,
// with ties on the sort time broken by ID.
func testFiltersAndPaging(t *testing.T, open opener) {
	g := NewWithT(t)
	ctx := context.Background()
	s, _ := open(t)
	var want []string // newest first
	for i := range 25 {
		r := JobRecord{
			ID:         fmt.Sprintf("github/%02d", i),
			Namespace:  []string{"team-a", "team-b"}[i%2],
			Pool:       []string{"small", "large"}[i%3/2],
			Repository: []string{"acme/api", "acme/web"}[i%5/4],
			Outcome:    []Outcome{OutcomeSucceeded, OutcomeFailed, ""}[i%3],
		}
		// Pairs of jobs share a queued time; one job knows only when it started.
		if i == 24 {
			r.Times.JobStarted = at(12 * time.Minute)
		} else {
			r.Times.Queued = at(time.Duration(i/2) * time.Minute)
		}
		g.Expect(s.UpsertJob(ctx, r)).To(Succeed())
	}
	for i := 24; i >= 0; i-- {
		want = append(want, fmt.Sprintf("github/%02d", i))
	}
	ids := func(rs []JobRecord) []string {
		out := []string{}
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}

	all, err := s.Jobs(ctx, JobQuery{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids(all)).To(Equal(want))

	var paged []string
	q := JobQuery{Limit: 7}
	for range 10 {
		page, err := s.Jobs(ctx, q)
		g.Expect(err).NotTo(HaveOccurred())
		if len(page) == 0 {
			break
		}
		g.Expect(len(page)).To(BeNumerically("<=", 7))
		paged = append(paged, ids(page)...)
		q.Before = page[len(page)-1].Cursor()
	}
	g.Expect(paged).To(Equal(want), "pages of 7 list every record once, in order")

	filtered := func(q JobQuery, keep func(i int) bool) {
		t.Helper()
		got, err := s.Jobs(ctx, q)
		g.Expect(err).NotTo(HaveOccurred())
		w := []string{}
		for i := 24; i >= 0; i-- {
			if keep(i) {
				w = append(w, fmt.Sprintf("github/%02d", i))
			}
		}
		g.Expect(ids(got)).To(Equal(w), "%+v", q)
	}
	filtered(JobQuery{Namespaces: []string{"team-a"}}, func(i int) bool { return i%2 == 0 })
	filtered(JobQuery{Namespaces: []string{"team-a", "team-b"}}, func(int) bool { return true })
	filtered(JobQuery{Namespaces: []string{"team-c"}}, func(int) bool { return false })
	filtered(JobQuery{Pool: "large"}, func(i int) bool { return i%3 == 2 })
	filtered(JobQuery{Repository: "acme/web"}, func(i int) bool { return i%5 == 4 })
	filtered(JobQuery{Outcome: OutcomeFailed}, func(i int) bool { return i%3 == 1 })
	filtered(JobQuery{From: t0.Add(3 * time.Minute), To: t0.Add(5 * time.Minute)}, func(i int) bool { return i >= 6 && i < 10 })
	filtered(JobQuery{Namespaces: []string{"team-b"}, Pool: "small", Limit: 2}, func(i int) bool { return i == 21 || i == 19 })

	_, err = s.Jobs(ctx, JobQuery{Before: "not a cursor!"})
	g.Expect(err).To(MatchError(ErrInvalid))
	big, err := s.Jobs(ctx, JobQuery{Limit: MaxLimit + 1})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(big).To(HaveLen(25))
}

// testConcurrentUpserts: recorders writing pieces of the same new record at once lose none.
func testConcurrentUpserts(t *testing.T, open opener) {
	g := NewWithT(t)
	ctx := context.Background()
	s, _ := open(t)
	pieces := []JobRecord{
		{ID: "buildkite/9", Namespace: "ns"}, {ID: "buildkite/9", Pool: "p"}, {ID: "buildkite/9", Runner: "r"},
		{ID: "buildkite/9", Times: JobTimes{Queued: at(0)}}, {ID: "buildkite/9", Times: JobTimes{JobStarted: at(time.Minute)}},
		{ID: "buildkite/9", VM: VMRef{VMID: "100"}}, {ID: "buildkite/9", Repository: "acme/api"}, {ID: "buildkite/9", Outcome: OutcomeCancelled},
	}
	errs := make(chan error, len(pieces))
	for _, p := range pieces {
		go func() { errs <- s.UpsertJob(ctx, p) }()
	}
	for range pieces {
		g.Expect(<-errs).To(Succeed())
	}
	got, err := s.Job(ctx, "buildkite/9")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{got.Namespace, got.Pool, got.Runner, got.VM.VMID, got.Repository, string(got.Outcome)}).
		To(Equal([]string{"ns", "p", "r", "100", "acme/api", "cancelled"}))
	g.Expect(got.Times.Queued).To(Equal(at(0)))
	g.Expect(got.Times.JobStarted).To(Equal(at(time.Minute)))
}

// testPercentiles: a known data set gives known nearest-rank percentiles per pool.
func testPercentiles(t *testing.T, open opener) {
	g := NewWithT(t)
	ctx := context.Background()
	s, _ := open(t)
	for i := 1; i <= 10; i++ {
		queued := t0.Add(time.Duration(i) * time.Hour)
		started := queued.Add(time.Duration(i) * time.Second)
		finished := started.Add(time.Duration(i) * 10 * time.Second)
		outcome := OutcomeSucceeded
		switch {
		case i == 3 || i == 6:
			outcome = OutcomeFailed
		case i == 9:
			outcome = OutcomeCancelled
		}
		g.Expect(s.UpsertJob(ctx, JobRecord{ID: fmt.Sprintf("github/a%d", i), Namespace: "team-a", Pool: "linux",
			Times: JobTimes{Queued: &queued, JobStarted: &started, JobFinished: &finished}, Outcome: outcome})).To(Succeed())
	}
	// Still waiting for a runner: counted, in neither percentile nor any outcome.
	g.Expect(s.UpsertJob(ctx, JobRecord{ID: "github/b1", Namespace: "team-a", Pool: "arm", Times: JobTimes{Queued: at(2 * time.Hour)}})).To(Succeed())
	g.Expect(s.UpsertJob(ctx, JobRecord{ID: "gitlab/c1", Namespace: "team-c", Pool: "linux", Outcome: OutcomeSucceeded,
		Times: JobTimes{Queued: at(time.Hour), JobStarted: at(time.Hour + time.Minute), JobFinished: at(2 * time.Hour)}})).To(Succeed())
	// Outside the window.
	g.Expect(s.UpsertJob(ctx, JobRecord{ID: "github/old", Namespace: "team-a", Pool: "linux", Outcome: OutcomeFailed,
		Times: JobTimes{Queued: at(-time.Hour), JobStarted: at(0), JobFinished: at(time.Hour)}})).To(Succeed())

	stats, err := s.Percentiles(ctx, StatsQuery{From: t0, To: t0.Add(24 * time.Hour)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats).To(Equal([]PoolStats{
		{Namespace: "team-a", Pool: "arm", Count: 1, Outcomes: map[Outcome]int64{}},
		{Namespace: "team-a", Pool: "linux", Count: 10,
			Pickup:   Percentiles{Samples: 10, P50: 5 * time.Second, P90: 9 * time.Second, P99: 10 * time.Second},
			Duration: Percentiles{Samples: 10, P50: 50 * time.Second, P90: 90 * time.Second, P99: 100 * time.Second},
			Outcomes: map[Outcome]int64{OutcomeSucceeded: 7, OutcomeFailed: 2, OutcomeCancelled: 1}},
		{Namespace: "team-c", Pool: "linux", Count: 1,
			Pickup:   Percentiles{Samples: 1, P50: time.Minute, P90: time.Minute, P99: time.Minute},
			Duration: Percentiles{Samples: 1, P50: 59 * time.Minute, P90: 59 * time.Minute, P99: 59 * time.Minute},
			Outcomes: map[Outcome]int64{OutcomeSucceeded: 1}},
	}))

	stats, err = s.Percentiles(ctx, StatsQuery{Namespaces: []string{"team-c", "team-z"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats).To(HaveLen(1))
	g.Expect(stats[0].Namespace).To(Equal("team-c"))
	stats, err = s.Percentiles(ctx, StatsQuery{Namespaces: []string{"team-a"}, Pool: "linux"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stats).To(HaveLen(1))
	g.Expect(stats[0].Count).To(Equal(int64(11)), "no window: the old job counts too")
	g.Expect(stats[0].Outcomes[OutcomeFailed]).To(Equal(int64(3)))
}
