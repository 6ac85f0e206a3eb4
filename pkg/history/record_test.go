package history

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestMerge(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	queued := t0.Add(123456789 * time.Nanosecond).In(berlin)
	stored := JobRecord{ID: "github/1", Namespace: "ns", Pool: "p", Labels: []string{"a"}, Outcome: OutcomeFailed,
		VM: VMRef{Provider: "proxmox", VMID: "100"}, Times: JobTimes{Queued: at(0), JobStarted: at(time.Minute)}}
	for _, tc := range []struct {
		name   string
		update JobRecord
		want   func(r *JobRecord)
	}{
		{"zero fields keep what was stored", JobRecord{ID: "github/1"}, func(*JobRecord) {}},
		{"non-zero fields overwrite", JobRecord{Pool: "q", Outcome: OutcomeSucceeded, VM: VMRef{Host: "node2"}},
			func(r *JobRecord) { r.Pool, r.Outcome, r.VM.Host = "q", OutcomeSucceeded, "node2" }},
		{"labels are replaced whole", JobRecord{Labels: []string{"b", "c"}}, func(r *JobRecord) { r.Labels = []string{"b", "c"} }},
		{"a time overwrites, in UTC to the microsecond", JobRecord{Times: JobTimes{Queued: &queued, JobFinished: at(time.Hour)}},
			func(r *JobRecord) { r.Times.Queued, r.Times.JobFinished = at(123456*time.Microsecond), at(time.Hour) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			want := stored
			want.Times = stored.Times
			tc.want(&want)
			g.Expect(merge(stored, tc.update)).To(Equal(want))
		})
	}
}

func TestSortTime(t *testing.T) {
	g := NewWithT(t)
	g.Expect(JobTimes{}.SortTime()).To(BeZero())
	g.Expect(JobTimes{Queued: at(time.Hour), Booted: at(0)}.SortTime()).To(Equal(t0.Add(time.Hour)), "queued wins when known")
	g.Expect(JobTimes{JobStarted: at(time.Hour), Booted: at(time.Minute)}.SortTime()).To(Equal(t0.Add(time.Minute)), "else the earliest")
}

func TestPercentilesByNearestRank(t *testing.T) {
	seconds := func(n int) []time.Duration {
		var ds []time.Duration
		for i := n; i >= 1; i-- { // unsorted on purpose
			ds = append(ds, time.Duration(i)*time.Second)
		}
		return ds
	}
	for _, tc := range []struct {
		n             int
		p50, p90, p99 time.Duration
	}{
		{0, 0, 0, 0},
		{1, time.Second, time.Second, time.Second},
		{2, time.Second, 2 * time.Second, 2 * time.Second},
		{10, 5 * time.Second, 9 * time.Second, 10 * time.Second},
		{100, 50 * time.Second, 90 * time.Second, 99 * time.Second},
		{1000, 500 * time.Second, 900 * time.Second, 990 * time.Second},
	} {
		g := NewWithT(t)
		g.Expect(percentiles(seconds(tc.n))).To(Equal(Percentiles{Samples: int64(tc.n), P50: tc.p50, P90: tc.p90, P99: tc.p99}), "n=%d", tc.n)
	}
}

func TestCursorRoundTrip(t *testing.T) {
	g := NewWithT(t)
	r := JobRecord{ID: "gitlab/group:project/42", Times: JobTimes{Booted: at(time.Microsecond)}}
	when, id, err := parseCursor(r.Cursor())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(when).To(Equal(t0.Add(time.Microsecond)))
	g.Expect(id).To(Equal(r.ID))
	_, _, err = parseCursor("bm8gY29sb24")
	g.Expect(err).To(MatchError(ErrInvalid))
}

func TestOpenURL(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for _, bad := range []string{"mysql://db", "/var/lib/history.db", "sqlite://", "sqlite:///tmp/x.db?cache=shared"} {
		_, err := Open(ctx, bad)
		g.Expect(err).To(MatchError(ErrInvalid), bad)
	}
	s, err := Open(ctx, "sqlite://"+t.TempDir()+"/history.db")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Close()).To(Succeed())
	_, err = Open(ctx, "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1")
	g.Expect(err).To(MatchError(ContainSubstring("PostgreSQL history database")))
}

// TestMigrationsMatch: both backends have the same steps, so a database moved from one to the
// other, or a fix made on one, is never a version apart.
func TestMigrationsMatch(t *testing.T) {
	g := NewWithT(t)
	lite, err := loadMigrations("sqlite")
	g.Expect(err).NotTo(HaveOccurred())
	pg, err := loadMigrations("postgres")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(lite)).To(Equal(len(pg)))
	for i := range lite {
		g.Expect(lite[i].name).To(Equal(pg[i].name))
		g.Expect(strings.TrimSpace(lite[i].sql)).NotTo(BeEmpty())
	}
}
