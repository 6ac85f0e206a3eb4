package snapshotschedule

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestParseAndNext(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	ny, _ := time.LoadLocation("America/New_York")
	for _, tc := range []struct {
		name, expr, tz string
		after, want    time.Time
	}{
		{"nightly in UTC", "0 2 * * *", "", time.Date(2026, 3, 1, 1, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)},
		{"nightly in UTC, already past today", "0 2 * * *", "UTC", time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 2, 0, 0, 0, time.UTC)},
		{"nightly in Berlin (winter, UTC+1)", "0 2 * * *", "Europe/Berlin", time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC), time.Date(2026, 1, 11, 1, 0, 0, 0, time.UTC)},
		{"nightly in Berlin (summer, UTC+2)", "0 2 * * *", "Europe/Berlin", time.Date(2026, 7, 10, 12, 0, 0, 0, time.UTC), time.Date(2026, 7, 11, 0, 0, 0, 0, time.UTC)},
		{"02:30 does not exist on the spring-forward night: skipped that night", "30 2 * * *", "Europe/Berlin",
			time.Date(2026, 3, 29, 0, 0, 0, 0, berlin), time.Date(2026, 3, 30, 2, 30, 0, 0, berlin)},
		{"weekly on Sunday in New York", "15 4 * * 0", "America/New_York", time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 29, 4, 15, 0, 0, ny)},
		{"descriptor", "@daily", "", time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)},
		{"first of the month", "0 0 1 * *", "", time.Date(2026, 2, 15, 0, 0, 0, 0, time.UTC), time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s, err := Parse(tc.expr, tc.tz)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Next(tc.after).Equal(tc.want)).To(BeTrue(), "got %v, want %v", s.Next(tc.after), tc.want)
		})
	}
}

func TestParseRefusals(t *testing.T) {
	for _, tc := range []struct{ expr, tz, want string }{
		{"0 2 * *", "", "expected exactly 5 fields"},
		{"61 2 * * *", "", "end of range (61) above maximum (59)"},
		{"0 0 2 * * *", "", "expected exactly 5 fields"},
		{"0 2 * * *", "Mars/Olympus", "time zone"},
		{"TZ=UTC 0 2 * * *", "", "set the time zone in timeZone"},
		{"CRON_TZ=UTC 0 2 * * *", "", "set the time zone in timeZone"},
		{"", "", "empty spec string"},
	} {
		t.Run(tc.expr+"/"+tc.tz, func(t *testing.T) {
			_, err := Parse(tc.expr, tc.tz)
			NewWithT(t).Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

// nightly returns n nightly snapshots at 02:00 UTC, the newest on day last.
func nightly(last time.Time, n int) []Snapshot {
	var out []Snapshot
	for i := 0; i < n; i++ {
		t := last.AddDate(0, 0, -i)
		out = append(out, Snapshot{Name: t.Format("0102"), Time: t, Done: true})
	}
	return out
}

func TestPrune(t *testing.T) {
	last := time.Date(2026, 3, 31, 2, 0, 0, 0, time.UTC) // a Tuesday
	names := func(ts ...string) []string { return ts }
	for _, tc := range []struct {
		name      string
		snapshots []Snapshot
		r         Retention
		loc       *time.Location
		want      []string
	}{
		{name: "no rules keep everything", snapshots: nightly(last, 10), want: nil},
		{name: "keep the newest 7 of 10", snapshots: nightly(last, 10), r: Retention{Count: 7}, want: names("0322", "0323", "0324")},
		{name: "fewer than the count", snapshots: nightly(last, 3), r: Retention{Count: 7}, want: nil},
		{name: "daily keeps the newest of each day", snapshots: append(nightly(last, 3),
			Snapshot{Name: "0331-early", Time: last.Add(-time.Hour), Done: true}),
			r: Retention{Daily: 3}, want: names("0331-early")},
		{name: "weekly keeps the newest of the last 2 ISO weeks", snapshots: nightly(last, 14), r: Retention{Weekly: 2},
			// Week 14 has Mon 30 and Tue 31 (keep 31); week 13 is Mon 23 to Sun 29 (keep 29).
			want: names("0318", "0319", "0320", "0321", "0322", "0323", "0324", "0325", "0326", "0327", "0328", "0330")},
		{name: "monthly keeps the newest of each month", snapshots: []Snapshot{
			{Name: "jan-10", Time: time.Date(2026, 1, 10, 2, 0, 0, 0, time.UTC), Done: true},
			{Name: "jan-31", Time: time.Date(2026, 1, 31, 2, 0, 0, 0, time.UTC), Done: true},
			{Name: "feb-28", Time: time.Date(2026, 2, 28, 2, 0, 0, 0, time.UTC), Done: true},
			{Name: "mar-01", Time: time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC), Done: true},
		}, r: Retention{Monthly: 2}, want: names("jan-10", "jan-31")},
		{name: "rules add up", snapshots: nightly(last, 10), r: Retention{Count: 2, Weekly: 2}, want: names("0322", "0323", "0324", "0325", "0326", "0327", "0328")},
		{name: "buckets follow the time zone", snapshots: []Snapshot{
			// 23:30 UTC on the 1st is the 2nd in Tokyo: two Tokyo days, one UTC day.
			{Name: "a", Time: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), Done: true},
			{Name: "b", Time: time.Date(2026, 3, 1, 23, 30, 0, 0, time.UTC), Done: true},
		}, r: Retention{Daily: 2}, loc: mustLoad("Asia/Tokyo"), want: nil},
		{name: "same snapshots in UTC share a day", snapshots: []Snapshot{
			{Name: "a", Time: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC), Done: true},
			{Name: "b", Time: time.Date(2026, 3, 1, 23, 30, 0, 0, time.UTC), Done: true},
		}, r: Retention{Daily: 2}, want: names("a")},
		{name: "in-progress snapshots are kept, failed ones go once a newer one succeeded", snapshots: append(nightly(last, 2),
			Snapshot{Name: "failed-old", Time: last.AddDate(0, 0, -5), Failed: true},
			Snapshot{Name: "failed-new", Time: last.Add(time.Hour), Failed: true},
			Snapshot{Name: "running", Time: last.Add(2 * time.Hour)}),
			r: Retention{Count: 1}, want: names("0330", "failed-old")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := Prune(tc.snapshots, tc.r, tc.loc)
			if tc.want == nil {
				g.Expect(got).To(BeEmpty())
				return
			}
			g.Expect(got).To(Equal(tc.want), fmt.Sprint(got))
		})
	}
}

func mustLoad(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return l
}
