package pvesim

import (
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"time"
)

// LoadModel makes the simulator take the time and impose the limits a real Proxmox VE cluster
// does, so a fleet manager meets at its busiest hour what it meets on real hardware. The zero
// value (Enabled false) is the fast, unlimited simulator unit tests use; DefaultLoadModel is what
// benchmarks and soak runs use.
//
// Every duration is model time; the simulator runs it TimeScale times faster in wall time, so a
// burst of a thousand clones finishes in bounded time on a small machine. Reports state the
// factor next to every figure.
type LoadModel struct {
	Enabled bool `json:"enabled"`
	// TimeScale divides every model duration (10 means a 2s clone takes 200ms). 0 means 1.
	TimeScale float64 `json:"timeScale"`

	// APIWorkers is how many requests pveproxy serves at once (three workers by default).
	APIWorkers int `json:"apiWorkers"`
	// APIQueue is how many more requests may wait for a worker; beyond it, a request's
	// connection is closed without an answer, as a saturated pveproxy refuses connections.
	APIQueue int `json:"apiQueue"`
	// RequestTime is how long a worker is busy with one request.
	RequestTime time.Duration `json:"requestTime"`

	// LinkedCloneTime is how long a linked clone's disk work takes (seconds on thin storage).
	LinkedCloneTime time.Duration `json:"linkedCloneTime"`
	// FullClonePerGiB is how long a full clone copies one GiB of disk.
	FullClonePerGiB time.Duration `json:"fullClonePerGiB"`
	// StorageSlots is how many clones or disk deletions may hold one storage's lock at once on
	// one node (shared storages: cluster-wide). Real PVE serialises them: 1.
	StorageSlots int `json:"storageSlots"`
	// LockTimeout is how long a task waits for a config or storage lock before failing with
	// PVE's "can't lock file ... - got timeout" (qemu-server waits 10s).
	LockTimeout time.Duration `json:"lockTimeout"`

	// TaskTime is how long other tasks (start, stop, config, destroy) run.
	TaskTime time.Duration `json:"taskTime"`
	// DestroyPerGiB adds disk removal time to a destroy task.
	DestroyPerGiB time.Duration `json:"destroyPerGiB"`
	// Jitter spreads every task duration uniformly by ±Jitter (0.2 = ±20%).
	Jitter float64 `json:"jitter"`
}

// DefaultLoadModel is the model benchmarks and soak runs use: three pveproxy workers with a
// queue of 100, linked clones of 3s, full clones at 6s per GiB, one clone per storage lock at a
// time, PVE's 10s lock timeout, 1s tasks with ±20% jitter, run ten times faster than real time.
func DefaultLoadModel() LoadModel {
	return LoadModel{
		Enabled:         true,
		TimeScale:       10,
		APIWorkers:      3,
		APIQueue:        100,
		RequestTime:     20 * time.Millisecond,
		LinkedCloneTime: 3 * time.Second,
		FullClonePerGiB: 6 * time.Second,
		StorageSlots:    1,
		LockTimeout:     10 * time.Second,
		TaskTime:        time.Second,
		DestroyPerGiB:   50 * time.Millisecond,
		Jitter:          0.2,
	}
}

// String prints the parameters in one line, for reports.
func (m LoadModel) String() string {
	if !m.Enabled {
		return "load model off"
	}
	return fmt.Sprintf("time scale %gx; %d API workers, queue %d, %v per request; linked clone %v, full clone %v/GiB; "+
		"%d clone per storage lock, lock timeout %v; tasks %v, destroy +%v/GiB; jitter ±%.0f%%",
		m.scale(), m.APIWorkers, m.APIQueue, m.RequestTime, m.LinkedCloneTime, m.FullClonePerGiB,
		m.StorageSlots, m.LockTimeout, m.TaskTime, m.DestroyPerGiB, m.Jitter*100)
}

// ScaleFactor is the time scale in effect (1 when TimeScale is unset).
func (m LoadModel) ScaleFactor() float64 { return m.scale() }

func (m LoadModel) scale() float64 {
	if m.TimeScale <= 0 {
		return 1
	}
	return m.TimeScale
}

// Wall converts a model duration to the wall time the simulator spends on it.
func (m LoadModel) Wall(d time.Duration) time.Duration {
	return time.Duration(float64(d) / m.scale())
}

// CloneTime is the model time of one clone's disk work.
func (m LoadModel) CloneTime(full bool, diskBytes int64) time.Duration {
	if !full {
		return m.LinkedCloneTime
	}
	gib := float64(diskBytes) / float64(1<<30)
	return time.Duration(gib * float64(m.FullClonePerGiB))
}

// CloneCeiling is the most clones a minute (model time) the model allows: every storage lock
// domain busy all the time with clones of this kind. lockDomains is the number of (node,
// storage) pairs clones land on.
func (m LoadModel) CloneCeiling(lockDomains int, full bool, diskBytes int64) float64 {
	ct := m.CloneTime(full, diskBytes)
	if ct <= 0 {
		return 0
	}
	slots := max(m.StorageSlots, 1)
	return float64(lockDomains*slots) * float64(time.Minute) / float64(ct)
}

// LoadStats are the simulator's load counters.
type LoadStats struct {
	// Requests counts API requests by "METHOD /path/{template}".
	Requests map[string]int `json:"requests"`
	// Queued counts requests that waited for a pveproxy worker; MaxQueue is the longest queue.
	Queued   int `json:"queued"`
	MaxQueue int `json:"maxQueue"`
	// Refused counts requests whose connection was closed because the queue was full.
	Refused int `json:"refused"`
	// LockWaits counts tasks that waited for a storage lock; LockTimeouts those that gave up.
	LockWaits    int `json:"lockWaits"`
	LockTimeouts int `json:"lockTimeouts"`
	// Clones counts clone tasks that finished OK.
	Clones int `json:"clones"`
}

// loadState is the model's runtime: the worker pool and the storage locks.
type loadState struct {
	m       LoadModel
	workers chan struct{}

	mu      sync.Mutex
	waiting int
	locks   map[string]chan struct{}
	rng     *rand.Rand
	stats   LoadStats
}

func newLoadState(m LoadModel, seed int64) *loadState {
	if m.APIWorkers <= 0 {
		m.APIWorkers = 3
	}
	if m.StorageSlots <= 0 {
		m.StorageSlots = 1
	}
	return &loadState{m: m, workers: make(chan struct{}, m.APIWorkers),
		locks: map[string]chan struct{}{}, rng: rand.New(rand.NewSource(seed + 1))}
}

// admit takes a pveproxy worker for one request, queueing for it; it returns false (refuse)
// when the queue is full or the client went away. release must be called after the request.
func (l *loadState) admit(done <-chan struct{}) (release func(), ok bool) {
	select {
	case l.workers <- struct{}{}:
	default:
		l.mu.Lock()
		if l.waiting >= l.m.APIQueue {
			l.stats.Refused++
			l.mu.Unlock()
			return nil, false
		}
		l.waiting++
		l.stats.Queued++
		l.stats.MaxQueue = max(l.stats.MaxQueue, l.waiting)
		l.mu.Unlock()
		select {
		case l.workers <- struct{}{}:
		case <-done:
			l.mu.Lock()
			l.waiting--
			l.mu.Unlock()
			return nil, false
		}
		l.mu.Lock()
		l.waiting--
		l.mu.Unlock()
	}
	return func() { <-l.workers }, true
}

// jittered spreads a model duration by the jitter and converts it to wall time.
func (l *loadState) jittered(d time.Duration) time.Duration {
	l.mu.Lock()
	f := 1 + l.m.Jitter*(2*l.rng.Float64()-1)
	l.mu.Unlock()
	return l.m.Wall(time.Duration(float64(d) * f))
}

// lock takes one slot of the named storage lock, waiting up to the lock timeout. It returns a
// release func, or nil after a timeout (or when closing is closed).
func (l *loadState) lock(name string, closing <-chan struct{}) func() {
	l.mu.Lock()
	ch, ok := l.locks[name]
	if !ok {
		ch = make(chan struct{}, l.m.StorageSlots)
		l.locks[name] = ch
	}
	l.mu.Unlock()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }
	default:
	}
	l.mu.Lock()
	l.stats.LockWaits++
	l.mu.Unlock()
	timer := time.NewTimer(l.m.Wall(l.m.LockTimeout))
	defer timer.Stop()
	select {
	case ch <- struct{}{}:
		return func() { <-ch }
	case <-timer.C:
	case <-closing:
	}
	l.mu.Lock()
	l.stats.LockTimeouts++
	l.mu.Unlock()
	return nil
}

func (l *loadState) countClone() {
	l.mu.Lock()
	l.stats.Clones++
	l.mu.Unlock()
}

// lockTimeoutText is PVE's error when a config lock was not obtained in time.
func lockTimeoutText(vmid int) string {
	return fmt.Sprintf("can't lock file '/var/lock/qemu-server/lock-%d.conf' - got timeout", vmid)
}

// taskLoad is what the model makes a task do: run for Time (model time, jittered), holding the
// storage lock Lock (if any) for that time; LockVMID names the config file in the timeout text,
// and FailPrefix prefixes it ("clone failed: ").
type taskLoad struct {
	Time       time.Duration
	Lock       string
	LockVMID   int
	FailPrefix string
}

// storageLockName names the lock a disk operation on storage takes on node: shared storages
// have one cluster-wide lock, local ones one per node.
func (s *Simulator) storageLockName(node, storage string) string {
	if st := s.storage(storage); st != nil && st.shared {
		return "storage-" + storage
	}
	return node + "/storage-" + storage
}

// diskLoad sums the disks of a config and names the storage lock of its first disk. Called with
// s.mu held.
func (s *Simulator) diskLoad(node string, conf map[string]string) (bytes int64, lock string) {
	for _, k := range sortedKeys(conf) {
		d := parseDrive(conf[k])
		if !isDriveKey(k) || strings.HasPrefix(k, "unused") || d.isCDROM() || d.storage == "" {
			continue
		}
		bytes += parseSize(d.opts["size"])
		if lock == "" {
			lock = s.storageLockName(node, d.storage)
		}
	}
	return bytes, lock
}

// SetLoadModel replaces the load model (counters start again from zero).
func (s *Simulator) SetLoadModel(m LoadModel) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Load = m
	if m.Enabled {
		s.load = newLoadState(m, s.cfg.Seed)
	} else {
		s.load = nil
	}
}

// LoadModel returns the model in effect.
func (s *Simulator) LoadModel() LoadModel {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cfg.Load
}

// LoadStats returns the load counters; Requests is filled whether or not the model is on.
func (s *Simulator) LoadStats() LoadStats {
	s.mu.Lock()
	l := s.load
	out := LoadStats{Requests: make(map[string]int, len(s.requests))}
	for k, v := range s.requests {
		out.Requests[k] = v
	}
	s.mu.Unlock()
	if l != nil {
		l.mu.Lock()
		st := l.stats
		l.mu.Unlock()
		st.Requests = out.Requests
		out = st
	}
	return out
}

func (s *Simulator) loadState() *loadState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.load
}
