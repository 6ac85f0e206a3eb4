package console

import (
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
)

// TestHistoryStats: each pool's pickup and duration percentiles and outcome counts over the window
// asked for, in the caller's namespaces only.
func TestHistoryStats(t *testing.T) {
	g := NewWithT(t)
	f := newHistoryFixture(t)
	now := time.Now().UTC().Truncate(time.Second)
	// Ten jobs of team-a's linux pool in the last day: pickups of 10s to 100s, runs of 1 to 10
	// minutes; one still running, one queued.
	for i := 1; i <= 10; i++ {
		outcome := history.OutcomeSucceeded
		if i%4 == 0 {
			outcome = history.OutcomeFailed
		}
		f.put(t, job(teamA, "linux", strconv.Itoa(i), now.Add(-time.Duration(i)*time.Hour), time.Duration(i)*10*time.Second,
			time.Duration(i)*time.Minute, outcome))
	}
	running := job(teamA, "linux", "11", now.Add(-time.Minute), 5*time.Second, 0, "")
	running.Times.JobFinished, running.Times.VMDestroyed = nil, nil
	f.put(t, running)
	queued := job(teamA, "linux", "12", now.Add(-30*time.Second), 0, 0, "")
	queued.Times = history.JobTimes{Queued: queued.Times.Queued}
	f.put(t, queued)
	// Older than a day, and another team's.
	f.put(t, job(teamA, "linux", "13", now.Add(-3*24*time.Hour), time.Hour, time.Minute, history.OutcomeCancelled))
	f.put(t, job(teamA, "windows", "14", now.Add(-2*time.Hour), time.Second, time.Second, history.OutcomeSucceeded))
	f.put(t, job(teamB, "linux", "15", now.Add(-time.Hour), time.Second, time.Second, history.OutcomeSucceeded))

	w := f.do(alice, "GET", "/api/v1/history/stats")
	g.Expect(w.Code).To(Equal(http.StatusOK), w.Body.String())
	day := decodeAs[HistoryStats](g, w)
	g.Expect(day.To.Sub(day.From)).To(Equal(24 * time.Hour))
	g.Expect(day.Items).To(HaveLen(2))
	linux := day.Items[0]
	g.Expect(linux.Namespace).To(Equal(teamA))
	g.Expect(linux.Pool).To(Equal("linux"))
	g.Expect(linux.Count).To(Equal(int64(12)))
	g.Expect(linux.Pickup).To(Equal(DurationPercentiles{Samples: 11, P50Seconds: 50, P90Seconds: 90, P99Seconds: 100}))
	g.Expect(linux.Duration).To(Equal(DurationPercentiles{Samples: 10, P50Seconds: 300, P90Seconds: 540, P99Seconds: 600}))
	g.Expect(linux.Outcomes).To(Equal(map[history.Outcome]int64{history.OutcomeSucceeded: 8, history.OutcomeFailed: 2}))
	g.Expect(day.Items[1].Pool).To(Equal("windows"))

	w = f.do(alice, "GET", "/api/v1/history/stats?window=7d&pool=linux")
	week := decodeAs[HistoryStats](g, w)
	g.Expect(week.Items).To(HaveLen(1))
	g.Expect(week.Items[0].Count).To(Equal(int64(13)))
	g.Expect(week.Items[0].Outcomes).To(HaveKeyWithValue(history.OutcomeCancelled, int64(1)))

	from, to := now.Add(-90*time.Minute).Format(time.RFC3339), now.Format(time.RFC3339)
	w = f.do(alice, "GET", "/api/v1/history/stats?"+url.Values{"from": {from}, "to": {to}}.Encode())
	span := decodeAs[HistoryStats](g, w)
	g.Expect(span.Items).To(HaveLen(1))
	g.Expect(span.Items[0].Count).To(Equal(int64(3)), "jobs 1, 11 and 12")

	w = f.do(audrey, "GET", "/api/v1/history/stats?pool=linux")
	g.Expect(decodeAs[HistoryStats](g, w).Items).To(HaveLen(2), "a cluster-wide reader sees both teams' linux pools")

	for query, field := range map[string]string{
		"window=1y": "window", "window=7d&from=2026-01-01T00:00:00Z": "window", "from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z": "from",
		"from=2025-01-01T00:00:00Z&to=2026-01-01T00:00:00Z": "from", "to=tomorrow": "to",
	} {
		w := f.do(alice, "GET", "/api/v1/history/stats?"+query)
		g.Expect(w.Code).To(Equal(http.StatusBadRequest), query)
		g.Expect(decodeAs[Problem](g, w).Errors).To(ContainElement(HaveField("Field", field)), query)
	}

	page := f.do(alice, "GET", "/history/stats?window=24h")
	g.Expect(page.Code).To(Equal(http.StatusOK))
	g.Expect(page.Body.String()).To(And(ContainSubstring(`data-pool="team-a/linux"`), ContainSubstring("<td class=\"num\">50.0s</td>"),
		ContainSubstring("<td class=\"num\">9m 00s</td>"), ContainSubstring("8 succeeded, 2 failed"), ContainSubstring("<option selected>24h</option>")))
}

// TestHistoryPage: the list page shows the caller's records with the filters as a form, pages on
// and links the exports of the same filters.
func TestHistoryPage(t *testing.T) {
	g := NewWithT(t)
	f := newHistoryFixture(t)
	for i := range 3 {
		r := job(teamA, "linux", strconv.Itoa(i+1), baseday.Add(time.Duration(i)*time.Hour), 20*time.Second, 2*time.Minute, history.OutcomeFailed)
		r.FailureReason = "exit status 1"
		f.put(t, r)
	}
	f.put(t, job(teamB, "linux", "99", baseday, 0, 0, ""))

	w := f.do(alice, "GET", "/history?pool=linux&outcome=failed&limit=2")
	g.Expect(w.Code).To(Equal(http.StatusOK))
	body := w.Body.String()
	g.Expect(body).To(And(ContainSubstring("<h1>Job history</h1>"), ContainSubstring(`href="/history" aria-current="page"`),
		ContainSubstring(`href="/history/jobs/github/3"`), ContainSubstring(`href="/history/jobs/github/2"`),
		ContainSubstring("exit status 1"), ContainSubstring("2m 00s"), ContainSubstring(`<option selected>failed</option>`),
		ContainSubstring(`href="/api/v1/history/jobs?format=csv&amp;outcome=failed&amp;pool=linux"`),
		ContainSubstring(`href="/api/v1/history/jobs?outcome=failed&amp;pool=linux"`),
		ContainSubstring(`href="/history/stats?pool=linux"`), ContainSubstring("Older jobs")))
	g.Expect(body).NotTo(Or(ContainSubstring("github/1\""), ContainSubstring("github/99")))

	w = f.do(alice, "GET", "/history?outcome=won")
	g.Expect(w.Code).To(Equal(http.StatusBadRequest))
}

func TestPreciseDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond: "850ms", 12400 * time.Millisecond: "12.4s", 185 * time.Second: "3m 05s",
		127 * time.Minute: "2h 07m", 76 * time.Hour: "3d 04h", -2 * time.Second: "−2.0s",
	} {
		NewWithT(t).Expect(preciseDuration(d)).To(Equal(want))
	}
}
