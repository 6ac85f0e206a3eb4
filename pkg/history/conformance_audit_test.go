package history

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func entry(subject string, kind ActorKind, action, objKind, namespace, name string, when time.Time) AuditEntry {
	return AuditEntry{Time: when, Actor: Actor{Subject: subject, Kind: kind}, Action: action,
		Object: ObjectRef{APIVersion: "infrastructure.hyperfleet.io/v1alpha1", Kind: objKind, Namespace: namespace, Name: name}, Result: ResultOK}
}

// testAudit: entries come back as appended, newest first, filtered and paged by ID.
func testAudit(t *testing.T, open opener) {
	g := NewWithT(t)
	ctx := context.Background()
	s, _ := open(t)
	first := entry("alice@example.com", ActorPerson, "power", "MachineClaim", "team-a", "vm-1", t0)
	first.Actor.Groups = []string{"admins", "team-a"}
	first.Detail = "off → on"
	entries := []AuditEntry{
		first,
		entry("system:serviceaccount:hyperfleet:controller", ActorController, "delete", "MachineClaim", "team-a", "vm-2", t0.Add(time.Minute)),
		entry("bob@example.com", ActorPerson, "snapshot", "MachineClaim", "team-b", "vm-1", t0.Add(2*time.Minute)),
		entry("alice@example.com", ActorPerson, "create", "HypervisorCluster", "", "pve", t0.Add(3*time.Minute)),
	}
	entries[1].Reason = "job finished"
	entries[2].Result = "snapshot failed: storage full"
	var ids []int64
	for _, e := range entries {
		id, err := s.AppendAudit(ctx, e)
		g.Expect(err).NotTo(HaveOccurred())
		ids = append(ids, id)
	}
	g.Expect(ids[0]).To(BeNumerically(">", 0))
	for i := 1; i < len(ids); i++ {
		g.Expect(ids[i]).To(BeNumerically(">", ids[i-1]), "IDs grow")
	}

	all, err := s.Audit(ctx, AuditQuery{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all).To(HaveLen(4))
	for i, e := range all {
		want := entries[len(entries)-1-i]
		want.ID = ids[len(ids)-1-i]
		g.Expect(e).To(Equal(want))
	}

	got := func(q AuditQuery) []int64 {
		t.Helper()
		es, err := s.Audit(ctx, q)
		g.Expect(err).NotTo(HaveOccurred())
		out := []int64{}
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out
	}
	g.Expect(got(AuditQuery{Namespaces: []string{"team-a"}})).To(Equal([]int64{ids[1], ids[0]}))
	g.Expect(got(AuditQuery{Namespaces: []string{"team-a", "team-b"}})).To(Equal([]int64{ids[2], ids[1], ids[0]}), "a restricted reader never sees cluster-scoped objects")
	g.Expect(got(AuditQuery{Actor: "alice@example.com"})).To(Equal([]int64{ids[3], ids[0]}))
	g.Expect(got(AuditQuery{Kind: "MachineClaim", Name: "vm-1"})).To(Equal([]int64{ids[2], ids[0]}))
	g.Expect(got(AuditQuery{From: t0.Add(time.Minute), To: t0.Add(3 * time.Minute)})).To(Equal([]int64{ids[2], ids[1]}))
	g.Expect(got(AuditQuery{Limit: 2})).To(Equal([]int64{ids[3], ids[2]}))
	g.Expect(got(AuditQuery{Limit: 2, Before: ids[2]})).To(Equal([]int64{ids[1], ids[0]}))

	// The store stamps an entry without a time and cuts a long detail on a character boundary.
	long := entry("carol", ActorPerson, "delete", "VMPool", "team-a", "big", time.Time{})
	long.Detail = strings.Repeat("é", MaxAuditDetail) // two bytes each
	before := time.Now().Add(-time.Second)
	id, err := s.AppendAudit(ctx, long)
	g.Expect(err).NotTo(HaveOccurred())
	es, err := s.Audit(ctx, AuditQuery{Name: "big"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(es).To(HaveLen(1))
	g.Expect(es[0].ID).To(Equal(id))
	g.Expect(es[0].Time).To(BeTemporally(">", before))
	g.Expect(es[0].Detail).To(Equal(strings.Repeat("é", MaxAuditDetail/2)))

	_, err = s.AppendAudit(ctx, AuditEntry{Action: "create"})
	g.Expect(err).To(MatchError(ErrInvalid))
	_, err = s.AppendAudit(ctx, entry("dave", "robot", "create", "VMPool", "team-a", "x", t0))
	g.Expect(err).To(MatchError(ErrInvalid))
}

// testAuditAppendOnly: the Store has no method that changes an entry, and the database itself
// refuses an UPDATE or a DELETE made beside the store; only Prune deletes.
func testAuditAppendOnly(t *testing.T, b backend, open opener) {
	g := NewWithT(t)
	ctx := context.Background()
	s, where := open(t)
	id, err := s.AppendAudit(ctx, entry("alice", ActorPerson, "delete", "MachineClaim", "team-a", "vm-1", t0))
	g.Expect(err).NotTo(HaveOccurred())
	raw := b.raw(t, where)
	g.Expect(raw("UPDATE audit SET result = 'ok, honest' WHERE id = ?", id)).To(MatchError(ContainSubstring("append-only")))
	g.Expect(raw("DELETE FROM audit WHERE id = ?", id)).To(MatchError(ContainSubstring("append-only")))
	if b.d.name == "postgres" {
		g.Expect(raw("TRUNCATE audit")).To(MatchError(ContainSubstring("append-only")))
	}
	es, err := s.Audit(ctx, AuditQuery{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(es).To(HaveLen(1))
	g.Expect(es[0].Result).To(Equal(ResultOK))
	_, pruned, err := s.Prune(ctx, t0.Add(time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pruned).To(Equal(int64(1)))
	g.Expect(raw("DELETE FROM audit")).To(Succeed(), "nothing left to refuse")
	_, err = s.AppendAudit(ctx, entry("alice", ActorPerson, "delete", "MachineClaim", "team-a", "vm-2", t0))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(raw("DELETE FROM audit")).To(MatchError(ContainSubstring("append-only")), "Prune left the guard on")
}

// testPrune: retention drops the job records not written since the cut-off, sealed or not, and
// the audit entries older than it.
func testPrune(t *testing.T, open opener) {
	g := NewWithT(t)
	ctx := context.Background()
	s, _ := open(t)
	var mu sync.Mutex
	now := t0
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	setNow := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }

	g.Expect(s.UpsertJob(ctx, JobRecord{ID: "github/old", Times: JobTimes{Queued: at(0)}})).To(Succeed())
	g.Expect(s.UpsertJob(ctx, JobRecord{ID: "github/sealed", Envelope: []byte("signed")})).To(Succeed())
	g.Expect(s.UpsertJob(ctx, JobRecord{ID: "github/touched", Times: JobTimes{Queued: at(0)}})).To(Succeed())
	_, err := s.AppendAudit(ctx, entry("alice", ActorPerson, "create", "VMPool", "a", "old", time.Time{}))
	g.Expect(err).NotTo(HaveOccurred())
	setNow(t0.Add(90 * 24 * time.Hour))
	g.Expect(s.UpsertJob(ctx, JobRecord{ID: "github/touched", Outcome: OutcomeSucceeded})).To(Succeed())
	g.Expect(s.UpsertJob(ctx, JobRecord{ID: "github/new", Times: JobTimes{Queued: at(0)}})).To(Succeed())
	_, err = s.AppendAudit(ctx, entry("alice", ActorPerson, "create", "VMPool", "a", "new", time.Time{}))
	g.Expect(err).NotTo(HaveOccurred())

	jobs, audit, err := s.Prune(ctx, t0.Add(30*24*time.Hour))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]int64{jobs, audit}).To(Equal([]int64{2, 1}))
	left, err := s.Jobs(ctx, JobQuery{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(left).To(HaveLen(2))
	g.Expect([]string{left[0].ID, left[1].ID}).To(ConsistOf("github/new", "github/touched"))
	es, err := s.Audit(ctx, AuditQuery{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(es).To(HaveLen(1))
	g.Expect(es[0].Object.Name).To(Equal("new"))

	jobs, audit, err = s.Prune(ctx, t0)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]int64{jobs, audit}).To(Equal([]int64{0, 0}))
}
