package placement

import "time"

// Defaults of DrainRetry: five attempts, 30 s after the first failure, then 1, 2 and 4 minutes.
const (
	DefaultDrainRetryInitial  = 30 * time.Second
	DefaultDrainRetryMax      = 10 * time.Minute
	DefaultDrainRetryAttempts = 5
)

// DrainRetry is how a host drain tries again to move a VM whose migration failed: the second
// attempt starts Initial after the first one failed, each further one twice as long after the
// last failure, never more than Max; once Attempts migrations of the VM have failed the drain
// gives up on it and reports it. Zero fields take the defaults.
type DrainRetry struct {
	Initial  time.Duration
	Max      time.Duration
	Attempts int
}

// Next says when the attempt after attempt (counted from 1), which failed at failedAt, may
// start, or that the drain gives up on the VM.
func (r DrainRetry) Next(attempt int, failedAt time.Time) (at time.Time, giveUp bool) {
	r = r.withDefaults()
	if attempt >= r.Attempts {
		return time.Time{}, true
	}
	delay := r.Initial
	for i := 1; i < attempt && delay < r.Max; i++ {
		delay *= 2
	}
	return failedAt.Add(min(delay, r.Max)), false
}

// MaxAttempts is how many migrations of one VM the drain tries.
func (r DrainRetry) MaxAttempts() int {
	return r.withDefaults().Attempts
}

func (r DrainRetry) withDefaults() DrainRetry {
	if r.Initial <= 0 {
		r.Initial = DefaultDrainRetryInitial
	}
	if r.Max <= 0 {
		r.Max = DefaultDrainRetryMax
	}
	if r.Max < r.Initial {
		r.Max = r.Initial
	}
	if r.Attempts <= 0 {
		r.Attempts = DefaultDrainRetryAttempts
	}
	return r
}
