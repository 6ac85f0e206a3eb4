package github

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// DefaultPollResync is how often a PollSet looks for pools that start or stop polling.
const DefaultPollResync = 10 * time.Second

// PollSet runs one Poller per App installation and scope for the GitHub pools whose
// spec.platform.github.demand is Polling or Both: pools of the same installation and scope share
// it (at the shortest of their intervals), and it stops when no pool needs it. It implements
// platform.Pollers; the manager runs it on its leader only.
type PollSet struct {
	// Reader lists RunnerPools.
	Reader client.Reader
	// Clients builds the pools' GitHub clients.
	Clients *PoolClients
	// Feed receives every poll.
	Feed platform.DemandFeed
	// Resync is how often pools are re-listed; DefaultPollResync when zero.
	Resync time.Duration
	// Clock paces the pollers; the real clock when nil.
	Clock clock.Clock

	mu      sync.Mutex
	running map[string]*pollGroup
}

// pollGroup is a running poller and the pools it serves.
type pollGroup struct {
	cancel       context.CancelFunc
	done         chan struct{}
	interval     time.Duration
	client       *Client
	pools        []types.NamespacedName
	installation string
	heldToo      bool
}

var _ platform.Pollers = (*PollSet)(nil)

// NeedLeaderElection: only the leader polls, since the rate limit is the installation's.
func (s *PollSet) NeedLeaderElection() bool { return true }

// Start syncs the pollers with the pools every Resync until ctx ends, then stops them all.
func (s *PollSet) Start(ctx context.Context) error {
	resync := s.Resync
	if resync <= 0 {
		resync = DefaultPollResync
	}
	t := time.NewTicker(resync)
	defer t.Stop()
	defer s.stopAll()
	for {
		if err := s.Sync(ctx); err != nil && ctx.Err() == nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing RunnerPools for GitHub polling")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sync starts the pollers pools need and stops those no pool needs any more.
func (s *PollSet) Sync(ctx context.Context) error {
	pools := &fleetv1.RunnerPoolList{}
	if err := s.Reader.List(ctx, pools); err != nil {
		return err
	}
	want := map[string]*pollGroup{}
	scopes := map[string]platform.Scope{}
	for i := range pools.Items {
		pool := &pools.Items[i]
		spec := pool.Spec.Platform.GitHub
		if !spec.Polls() || !pool.DeletionTimestamp.IsZero() {
			continue
		}
		c, scope, err := s.Clients.For(ctx, pool)
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("GitHub pool cannot be polled", "pool", client.ObjectKeyFromObject(pool), "error", err.Error())
			continue
		}
		id, err := c.Installation(ctx, scope)
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("GitHub pool cannot be polled", "pool", client.ObjectKeyFromObject(pool), "error", err.Error())
			continue
		}
		key := strconv.FormatInt(id, 10) + "|" + strings.ToLower(scope.String())
		interval := DefaultPollInterval
		if spec.PollInterval != nil {
			interval = min(max(spec.PollInterval.Duration, MinPollInterval), MaxPollInterval)
		}
		g, ok := want[key]
		if !ok {
			g = &pollGroup{interval: interval, client: c, installation: strconv.FormatInt(id, 10)}
			want[key], scopes[key] = g, scope
		}
		g.interval = min(g.interval, interval)
		g.heldToo = g.heldToo || spec.Demand == fleetv1.GitHubDemandBoth
		g.pools = append(g.pools, client.ObjectKeyFromObject(pool))
	}
	var stopped []chan struct{}
	defer func() {
		for _, done := range stopped { // outside s.mu: a poller's sink takes it
			<-done
		}
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		s.running = map[string]*pollGroup{}
	}
	for key, old := range s.running {
		g, ok := want[key]
		if ok && g.interval == old.interval && g.client == old.client {
			old.pools, old.heldToo = g.pools, g.heldToo // same poller, new membership
			continue
		}
		old.cancel()
		stopped = append(stopped, old.done)
		delete(s.running, key)
	}
	for key, g := range want {
		if _, ok := s.running[key]; ok {
			continue
		}
		s.start(ctx, key, g, scopes[key])
	}
	return nil
}

// start runs g's poller; s.mu is held.
func (s *PollSet) start(ctx context.Context, key string, g *pollGroup, scope platform.Scope) {
	pctx, cancel := context.WithCancel(ctx)
	g.cancel, g.done = cancel, make(chan struct{})
	s.running[key] = g
	p := &Poller{Client: g.client, Scope: scope, Interval: g.interval, Clock: s.Clock,
		Sink: func(ctx context.Context, r PollResult) {
			s.mu.Lock()
			pools, heldToo := slices.Clone(g.pools), g.heldToo
			s.mu.Unlock()
			s.Feed(ctx, platform.PolledDemand{Kind: platform.KindGitHub, Installation: g.installation,
				Pools: pools, Jobs: r.Jobs, Err: r.Err, Next: r.Next, HeldToo: heldToo})
		}}
	ctrl.LoggerFrom(ctx).Info("polling GitHub for queued jobs", "scope", scope.String(), "installation", g.installation, "interval", g.interval, "pools", len(g.pools))
	go func() { defer close(g.done); p.Run(pctx) }()
}

// Running returns the installation+scope keys polled now, for tests and diagnostics.
func (s *PollSet) Running() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range s.running {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (s *PollSet) stopAll() {
	s.mu.Lock()
	var stopped []chan struct{}
	for key, g := range s.running {
		g.cancel()
		stopped = append(stopped, g.done)
		delete(s.running, key)
	}
	s.mu.Unlock()
	for _, done := range stopped {
		<-done
	}
}
