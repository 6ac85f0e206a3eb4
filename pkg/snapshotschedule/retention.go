package snapshotschedule

import (
	"fmt"
	"sort"
	"time"
)

// Retention is how many snapshots a schedule keeps. A snapshot is kept when any rule keeps it;
// with no rule at all, every snapshot is kept.
type Retention struct {
	// Count keeps the newest Count snapshots.
	Count int
	// Daily, Weekly and Monthly keep the newest snapshot of each of the newest that many days,
	// ISO weeks and months that have one, in the schedule's time zone.
	Daily, Weekly, Monthly int
}

// IsZero reports whether no rule is set.
func (r Retention) IsZero() bool {
	return r.Count <= 0 && r.Daily <= 0 && r.Weekly <= 0 && r.Monthly <= 0
}

// Snapshot is one snapshot a schedule took.
type Snapshot struct {
	Name string
	// Time is when the schedule took it (its scheduled time, not when the hypervisor finished).
	Time time.Time
	// Done is true once it succeeded; Failed once it failed. A snapshot that is neither is in
	// progress and always kept.
	Done, Failed bool
}

// Prune returns the names of the snapshots to delete. In-progress snapshots are kept; a failed
// snapshot is deleted once a newer one succeeded; the succeeded ones are kept by the rules.
func Prune(snapshots []Snapshot, r Retention, loc *time.Location) []string {
	if loc == nil {
		loc = time.UTC
	}
	var done []Snapshot
	var newestDone time.Time
	for _, s := range snapshots {
		if s.Done {
			done = append(done, s)
			if s.Time.After(newestDone) {
				newestDone = s.Time
			}
		}
	}
	var drop []string
	for _, s := range snapshots {
		if s.Failed && !newestDone.IsZero() && s.Time.Before(newestDone) {
			drop = append(drop, s.Name)
		}
	}
	if r.IsZero() {
		sort.Strings(drop)
		return drop
	}
	// Newest first; ties broken by name so the result does not depend on listing order.
	sort.Slice(done, func(i, j int) bool {
		if !done[i].Time.Equal(done[j].Time) {
			return done[i].Time.After(done[j].Time)
		}
		return done[i].Name > done[j].Name
	})
	keep := map[string]bool{}
	for i := 0; i < len(done) && i < r.Count; i++ {
		keep[done[i].Name] = true
	}
	bucket := func(n int, key func(time.Time) string) {
		seen := map[string]bool{}
		for _, s := range done {
			if len(seen) >= n {
				return
			}
			k := key(s.Time.In(loc))
			if !seen[k] {
				seen[k] = true
				keep[s.Name] = true // the newest of its bucket, as done is newest first
			}
		}
	}
	bucket(r.Daily, func(t time.Time) string { return t.Format("2006-01-02") })
	bucket(r.Weekly, func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) })
	bucket(r.Monthly, func(t time.Time) string { return t.Format("2006-01") })
	for _, s := range done {
		if !keep[s.Name] {
			drop = append(drop, s.Name)
		}
	}
	sort.Strings(drop)
	return drop
}
