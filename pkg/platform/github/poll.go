package github

import (
	"context"
	"errors"
	"time"

	gh "github.com/google/go-github/v66/github"
	"k8s.io/utils/clock"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Poll intervals: the API accepts a pool's spec.platform.github.pollInterval between
// MinPollInterval and MaxPollInterval; DefaultPollInterval when it is not set.
const (
	DefaultPollInterval = 30 * time.Second
	MinPollInterval     = 10 * time.Second
	MaxPollInterval     = 10 * time.Minute
)

// Backoff bounds of a poller: after an error without a retry time it waits MinBackoff, doubling
// up to MaxBackoff; after a rate limit that names no time it waits RateLimitBackoff.
const (
	MinBackoff       = 5 * time.Second
	MaxBackoff       = 5 * time.Minute
	RateLimitBackoff = time.Minute
	// LowBudget is the X-RateLimit-Remaining below which a poller stops before it is refused and
	// waits for X-RateLimit-Reset, leaving the rest of the window to runner registrations.
	LowBudget = 100
)

// PollResult is one poll's outcome, handed to the poller's sink.
type PollResult struct {
	// Jobs are the queued, waiting and in-progress jobs in scope (see Client.ActiveJobs); nil
	// when Err is set.
	Jobs []platform.Job
	// Err is the poll's error; a rate limit matches platform.ErrRateLimited.
	Err error
	// Next is when the poller polls again: the interval, a backoff, or a rate limit's reset.
	Next time.Time
}

// Poller polls one installation+scope's queued jobs every interval, for pools that get no
// webhook: GitHub has no "queued jobs" query and no push without a public endpoint, so the REST
// API is read with conditional requests (a 304 costs no rate limit) and the rate-limit headers
// are honoured: a refused or nearly spent budget stops the poller until the time GitHub names,
// and errors back off exponentially. It never polls faster than its interval.
type Poller struct {
	Client *Client
	Scope  platform.Scope
	// Interval between polls; DefaultPollInterval when zero.
	Interval time.Duration
	// Clock paces the poller; the real clock when nil.
	Clock clock.Clock
	// Sink receives every poll's result; it runs on the poller's goroutine.
	Sink func(context.Context, PollResult)
}

// Run polls until ctx ends.
func (p *Poller) Run(ctx context.Context) {
	clk := p.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultPollInterval
	}
	backoff := time.Duration(0)
	for {
		res := p.pollOnce(ctx, clk, interval, &backoff)
		if ctx.Err() != nil {
			return
		}
		if p.Sink != nil {
			p.Sink(ctx, res)
		}
		t := clk.NewTimer(res.Next.Sub(clk.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// pollOnce polls and decides when the next poll is.
func (p *Poller) pollOnce(ctx context.Context, clk clock.Clock, interval time.Duration, backoff *time.Duration) PollResult {
	jobs, err := p.Client.ActiveJobs(ctx, p.Scope)
	now := clk.Now()
	if err != nil {
		return PollResult{Err: err, Next: now.Add(p.backoffFor(err, now, backoff))}
	}
	*backoff = 0
	next := now.Add(interval)
	if remaining, ok := p.Client.RateLimitRemaining(); ok && remaining < LowBudget {
		if reset, ok := p.Client.RateLimitReset(); ok && reset.After(next) {
			next = reset
		}
	}
	return PollResult{Jobs: jobs, Next: next}
}

// backoffFor is how long to wait after err: until a rate limit lifts (Retry-After of a secondary
// limit, X-RateLimit-Reset of the primary one), else an exponential backoff.
func (p *Poller) backoffFor(err error, now time.Time, backoff *time.Duration) time.Duration {
	var abuse *gh.AbuseRateLimitError
	var primary *gh.RateLimitError
	switch {
	case errors.As(err, &abuse):
		if abuse.RetryAfter != nil && *abuse.RetryAfter > 0 {
			return *abuse.RetryAfter
		}
		return RateLimitBackoff
	case errors.As(err, &primary):
		if d := primary.Rate.Reset.Time.Sub(now); d > 0 {
			return d
		}
		return RateLimitBackoff
	case errors.Is(err, platform.ErrRateLimited):
		if at, ok := platform.RetryAt(err); ok && at.After(time.Now()) {
			return time.Until(at)
		}
		return RateLimitBackoff
	}
	switch {
	case *backoff == 0:
		*backoff = MinBackoff
	case *backoff < MaxBackoff:
		*backoff = min(2**backoff, MaxBackoff)
	}
	return *backoff
}
