package machineclaim

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// pollPacer paces the reads a claim repeats while it waits: its in-flight task and the guest
// agent's addresses. The first read of a task comes when a task of its kind typically ends, later
// ones back off (the poll interval, doubled each time, up to maxPollDelay), and a claim woken in
// between (its own status write, a Machine or BootstrapConfig change) does not read early. Memory
// only: a restarted manager reads at once, then paces again.
type pollPacer struct {
	mu    sync.Mutex
	polls map[types.UID]pollState
}

// pollState is what a claim read last, and when.
type pollState struct {
	// key is the task ID, or addressPollKey for the guest agent.
	key string
	// since is when the wait began: the task's start as this process saw it.
	since time.Time
	// reads made so far, and when the last was made.
	reads int
	last  time.Time
}

const addressPollKey = "addresses"

// maxPollDelayPolls bounds a backed-off read delay, in poll intervals (30 s at the default 2 s).
const maxPollDelayPolls = 15

// started records the start of a wait (a task just recorded).
func (p *pollPacer) started(uid types.UID, key string, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.polls == nil {
		p.polls = map[types.UID]pollState{}
	}
	p.polls[uid] = pollState{key: key, since: at}
}

// until is how long to wait before the next read of key: first after expected from since (the
// recorded start, or fallback for a wait this process did not see begin), then after interval,
// doubling with every read.
func (p *pollPacer) until(uid types.UID, key string, fallback time.Time, expected, interval time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.polls[uid]
	if !ok || st.key != key {
		return time.Until(fallback.Add(expected))
	}
	if st.reads == 0 {
		return time.Until(st.since.Add(expected))
	}
	return time.Until(st.last.Add(backoffDelay(interval, st.reads)))
}

// next is the delay until the read after the one just made.
func (p *pollPacer) next(uid types.UID, key string, interval time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.polls[uid]
	return backoffDelay(interval, max(st.reads, 1))
}

// read records a read of key.
func (p *pollPacer) read(uid types.UID, key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.polls == nil {
		p.polls = map[types.UID]pollState{}
	}
	st, ok := p.polls[uid]
	if !ok || st.key != key {
		st = pollState{key: key, since: time.Now()}
	}
	st.reads++
	st.last = time.Now()
	p.polls[uid] = st
}

// reads is how many reads of key the claim has made in its current wait.
func (p *pollPacer) reads(uid types.UID, key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.polls[uid]; ok && st.key == key {
		return st.reads
	}
	return 0
}

// done forgets a claim's wait.
func (p *pollPacer) done(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.polls, uid)
}

// backoffDelay is interval doubled for every read after the first, up to maxPollDelayPolls.
func backoffDelay(interval time.Duration, reads int) time.Duration {
	d := interval
	for i := 1; i < reads && d < maxPollDelayPolls*interval; i++ {
		d *= 2
	}
	return min(d, maxPollDelayPolls*interval)
}

// expectedTaskTime is how long a task of op typically runs on Proxmox VE, in poll intervals (2 s
// by default): a linked clone a few seconds (the first read comes at 4 s), a full clone about 6 s
// per GiB of the claim's disk (a read at 4 s plus that, bounded by two minutes), a destroy, which
// removes the disks, a few seconds (4 s), and the other tasks (start, stop, a disk resize) about a
// second, read at 2 s.
func expectedTaskTime(op string, c *infrav1.MachineClaim, interval time.Duration) time.Duration {
	switch op {
	case infrav1.TaskDelete:
		return 2 * interval
	case infrav1.TaskClone:
	default:
		return interval
	}
	if c.Spec.CloneMode != infrav1.CloneFull {
		return 2 * interval
	}
	gib := time.Duration(c.Spec.DiskSizeGiB)
	if gib == 0 {
		gib = 32
	}
	return min(2*interval+3*interval*gib, 60*interval)
}
