package capacity

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestQueueInvariants drives a queue with generated requests, releases and wake-ups from
// several pools and checks after every step: no host runs more clones or deletes than its limits,
// no storage more clones and deletes together than its limit, every
// grant goes to the oldest waiting request of its pool for the same host and storage, and no
// pool with a request waiting sees more grants to other pools than there are pools before its
// own.
func TestQueueInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limits := Limits{
			ClonesPerHost:   rapid.IntRange(1, 4).Draw(rt, "clonesPerHost"),
			TasksPerStorage: rapid.IntRange(1, 3).Draw(rt, "tasksPerStorage"),
			DeletesPerHost:  rapid.IntRange(1, 4).Draw(rt, "deletesPerHost"),
		}
		q, clock := newTestQueue(limits)
		pools := []string{"a", "b", "c"}
		hosts := []string{"n1", "n2"}
		waiting := map[string]Request{}
		held := map[string]Request{}
		// skipped counts, per pool with a request waiting, the grants that went to other pools
		// while one of its requests could have used the same slot.
		skipped := map[string]int{}
		seq := 0
		grant := func(gs []Grant) {
			for _, g := range gs {
				r, ok := waiting[g.Key]
				if !ok {
					rt.Fatalf("granted %s, which was not waiting", g.Key)
				}
				for _, w := range waiting {
					if w.Pool == r.Pool && w.Op == r.Op && w.Host == r.Host && w.Storage == r.Storage && w.Created.Before(r.Created) {
						rt.Fatalf("granted %s before the older %s of the same pool", r.Key, w.Key)
					}
				}
				passedOver := map[string]bool{}
				for _, w := range waiting {
					if w.Pool != r.Pool && w.Op == r.Op && w.Host == r.Host && w.Storage == r.Storage {
						passedOver[w.Pool] = true
					}
				}
				for p := range passedOver {
					if skipped[p]++; skipped[p] > len(pools) {
						rt.Fatalf("pool %s starves: %d grants went elsewhere while it waited", p, skipped[p])
					}
				}
				skipped[r.Pool] = 0
				delete(waiting, g.Key)
				held[g.Key] = r
				rt.Logf("granted %s (%s %s %s %s)", r.Key, r.Pool, r.Op, r.Host, r.Storage)
				// The woken claim comes back for its slot, as a reconcile does.
				if ok, _ := q.Acquire(r); !ok {
					rt.Fatalf("%s was granted a slot but does not hold it", r.Key)
				}
			}
		}
		steps := rapid.IntRange(1, 120).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 3).Draw(rt, "action") {
			case 0, 1:
				seq++
				r := Request{
					Key:     fmt.Sprintf("r%d", seq),
					Pool:    rapid.SampledFrom(pools).Draw(rt, "pool"),
					Op:      rapid.SampledFrom([]Operation{OpClone, OpClone, OpDelete}).Draw(rt, "op"),
					Host:    rapid.SampledFrom(hosts).Draw(rt, "host"),
					Created: t0.Add(time.Duration(seq) * time.Second),
				}
				// A delete names its VM's storage when it is known; a clone always does.
				storages := []string{"s1", "s2"}
				if r.Op == OpDelete {
					storages = append(storages, "")
				}
				if s := rapid.SampledFrom(storages).Draw(rt, "storage"); s != "" {
					r.Storage = r.Host + "/" + s
				}
				waiting[r.Key] = r
				ok, woken := q.Acquire(r)
				grant(woken)
				if ok {
					grant([]Grant{{Key: r.Key}})
				}
			case 2:
				if len(held) == 0 {
					continue
				}
				k := rapid.SampledFrom(sortedKeys(held)).Draw(rt, "release")
				delete(held, k)
				grant(q.Release(k))
			case 3:
				clock.step(time.Second)
				grant(q.Dispatch())
			}
			clonesOnHost, tasksOnStorage, deletesOnHost := map[string]int{}, map[string]int{}, map[string]int{}
			for _, r := range held {
				if r.Op == OpClone {
					clonesOnHost[r.Host]++
				} else {
					deletesOnHost[r.Host]++
				}
				if r.Storage != "" {
					tasksOnStorage[r.Storage]++
				}
			}
			for h, n := range clonesOnHost {
				if n > limits.ClonesPerHost {
					rt.Fatalf("%d clones on %s, limit %d", n, h, limits.ClonesPerHost)
				}
			}
			for s, n := range tasksOnStorage {
				if n > limits.TasksPerStorage {
					rt.Fatalf("%d clones and deletes on %s, limit %d", n, s, limits.TasksPerStorage)
				}
			}
			for h, n := range deletesOnHost {
				if n > limits.DeletesPerHost {
					rt.Fatalf("%d deletes on %s, limit %d", n, h, limits.DeletesPerHost)
				}
			}
			st := q.Stats()
			if st.Waiting[OpClone]+st.Waiting[OpDelete] != len(waiting) {
				rt.Fatalf("queue says %v waiting, %d are", st.Waiting, len(waiting))
			}
		}
		// Releasing everything drains the line: nothing waits for ever.
		for len(held) > 0 {
			for _, k := range sortedKeys(held) {
				delete(held, k)
				grant(q.Release(k))
			}
		}
		if len(waiting) > 0 {
			rt.Fatalf("%d requests still wait with every slot free", len(waiting))
		}
	})
}

// TestCapacityLineInvariants checks the capacity line: each try goes to the oldest claim still
// waiting in its pool, of the pool that found room longest ago (a try that finds none does not
// use up the pool's turn), and the queue counts exactly the claims still waiting.
func TestCapacityLineInvariants(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		q, _ := newTestQueue(Limits{})
		n := rapid.IntRange(1, 30).Draw(rt, "claims")
		line := map[string]Request{}
		for i := range n {
			r := Request{Key: fmt.Sprintf("c%02d", i), Pool: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "pool"),
				Created: t0.Add(time.Duration(i) * time.Second)}
			line[r.Key] = r
			q.NoCapacity(r)
		}
		// placedAt is when each pool last found room: the pool that found it longest ago goes first.
		placedAt, step := map[string]int{}, 0
		check := func(r Request) {
			for _, o := range line {
				if o.Pool == r.Pool && o.Created.Before(r.Created) {
					rt.Fatalf("%s tried before the older %s of its pool", r.Key, o.Key)
				}
				if o.Pool != r.Pool && placedAt[o.Pool] < placedAt[r.Pool] {
					rt.Fatalf("pool %s tried while pool %s, which found room longer ago, waits", r.Pool, o.Pool)
				}
			}
			if !q.MayPlace(r, 0) {
				rt.Fatalf("%s holds a try but may not place", r.Key)
			}
		}
		for wake := 0; len(line) > 0; wake++ {
			if wake > 4*n {
				break // claims that keep finding no room may wait longer; the order is what is checked
			}
			gs := q.CapacityFreed(1)
			if len(gs) != 1 {
				rt.Fatalf("wake-up %d gave %d tries with %d waiting", wake, len(gs), len(line))
			}
			r := line[gs[0].Key]
			check(r)
			if !rapid.Bool().Draw(rt, "placed") {
				q.NoCapacity(r)
				continue
			}
			// Placed: the try passes on, as room may be left, and is used at once.
			step++
			placedAt[r.Pool] = step
			delete(line, r.Key)
			next := q.Placed(r.Key)
			for len(next) > 0 {
				r := line[next[0].Key]
				check(r)
				if !rapid.Bool().Draw(rt, "placed") {
					q.NoCapacity(r)
					break
				}
				step++
				placedAt[r.Pool] = step
				delete(line, r.Key)
				next = q.Placed(r.Key)
			}
		}
		counted := 0
		for _, n := range q.Stats().WaitingForCapacity {
			counted += n
		}
		if counted != len(line) {
			rt.Fatalf("%d claims wait but the queue counts %d", len(line), counted)
		}
	})
}

func sortedKeys[T any](m map[string]T) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slicesSort(out)
	return out
}

func slicesSort(s []string) { slices.Sort(s) }
