package snapshotschedule

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// parser accepts the five standard fields (minute hour day-of-month month day-of-week) and the
// @daily-style descriptors; no seconds field, no CRON_TZ prefix (the time zone is its own field).
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Schedule is a parsed cron expression in a time zone.
type Schedule struct {
	sched cron.Schedule
	loc   *time.Location
}

// Parse parses a five-field cron expression and an IANA time zone name ("" is UTC).
func Parse(expr, timeZone string) (*Schedule, error) {
	loc := time.UTC
	if timeZone != "" {
		l, err := time.LoadLocation(timeZone)
		if err != nil {
			return nil, fmt.Errorf("time zone %q: %w", timeZone, err)
		}
		loc = l
	}
	if len(expr) > 0 && (expr[0] == 'T' || expr[0] == 'C') {
		return nil, fmt.Errorf("schedule %q: set the time zone in timeZone, not in the expression", expr)
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", expr, err)
	}
	return &Schedule{sched: s, loc: loc}, nil
}

// Location is the schedule's time zone.
func (s *Schedule) Location() *time.Location { return s.loc }

// Next is the first time after t the schedule fires, read in its time zone: "0 2 * * *" in
// Europe/Berlin fires at 02:00 Berlin time, winter and summer. A time that does not exist on a
// spring-forward night (02:30 in Berlin) is skipped that night.
func (s *Schedule) Next(t time.Time) time.Time {
	return s.sched.Next(t.In(s.loc))
}
