package platform

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// PolledDemand is one poll of a platform's API for the pools that share an installation and a
// scope, for pools whose demand comes from polling rather than (or beside) webhooks.
type PolledDemand struct {
	Kind Kind
	// Installation is the account the pools' credentials proved (Source.Installation), the key
	// of job claims.
	Installation string
	// Pools are the pools this poll serves; each takes the jobs routed to it.
	Pools []types.NamespacedName
	// Jobs are the queued, held and in-progress jobs in the scope (an in-progress job names its
	// runner); nil when Err is set.
	Jobs []Job
	// Err is the poll's error; ErrRateLimited says the platform refused it until RetryAt.
	Err error
	// Next is when the next poll is (a rate limit's reset after a refusal).
	Next time.Time
	// HeldToo says the pools also get webhooks, so jobs a poll has not listed yet may be newer
	// than it: they are dropped only once older than the repair loop's minimum age.
	HeldToo bool
}

// DemandFeed receives every poll; it records the jobs in the pools' ledgers.
type DemandFeed func(ctx context.Context, d PolledDemand)

// Pollers run the polls of every pool that needs them, one poller per installation and scope,
// started and stopped as pools come and go. Start blocks until ctx ends. Only one replica may run
// them (the manager's leader): the platform's rate limit is per installation, not per replica.
type Pollers interface {
	Start(ctx context.Context) error
}
