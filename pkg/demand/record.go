package demand

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Record is what the ledger knows about one job.
type Record struct {
	// State is waiting (held: not demand), queued (demand), in_progress or completed.
	State platform.JobState
	// LabelSet is platform.LabelSetKey of the job's runs-on labels.
	LabelSet string
	// Runner is the runner that took the job, once one did.
	Runner string
	// Transition is when the job last moved forward (second precision).
	Transition time.Time
	// FirstQueued is when the job was first seen queued; zero if it was first seen running.
	FirstQueued time.Time
	// Unlisted counts the repair listings in a row that did not show this queued or held job.
	Unlisted int
	// Presumed marks a completion the repair loop inferred because the platform stopped listing
	// the job, not one the platform announced: a listing that shows the job queued again, or a
	// webhook moving it on, overrides it.
	Presumed bool
	// Disputed marks a job the platform's listing showed waiting for a runner after a delivery
	// had said it was running or done: a forged or stale delivery. From then on only listings
	// take the job out of the queue; deliveries that would are dropped (see Store.Record).
	Disputed bool
}

// forwardFrom is the state a new event must move forward from: a presumed completion counts as
// still queued, so the platform's own word about the job is taken.
func (r Record) forwardFrom() platform.JobState {
	if r.Presumed {
		return platform.JobQueued
	}
	return r.State
}

// leavesQueue reports whether event state to would take this job out of the queue on a
// delivery's word alone, which a disputed job does not allow.
func (r Record) leavesQueue(to platform.JobState) bool {
	from := r.forwardFrom()
	return (from.NeedsRunner() || from.IsHeld()) && (to == platform.JobInProgress || to == platform.JobCompleted)
}

// Demand is a snapshot of one pool's ledger.
type Demand struct {
	// Queued counts jobs queued (held jobs are not demand).
	Queued int
	// Busy maps runner name to job key for jobs in progress.
	Busy map[string]string
	// Jobs is every retained record by JobKey of its job ID, completed ones included.
	Jobs map[string]Record
}

// QueuedByLabelSet counts queued jobs per label set key, for pools that scale per set.
func (d Demand) QueuedByLabelSet() map[string]int {
	out := map[string]int{}
	for _, r := range d.Jobs {
		if r.State.NeedsRunner() {
			out[r.LabelSet]++
		}
	}
	return out
}

// wireRecord is a Record as stored in the ConfigMap: short keys keep about 5000 records well
// inside the 1 MiB object limit.
type wireRecord struct {
	S platform.JobState `json:"s"`
	L string            `json:"l"`
	R string            `json:"r,omitempty"`
	T int64             `json:"t"`
	Q int64             `json:"q,omitempty"`
	// QM is the millisecond of the first-queued second, for pickup latencies under a second;
	// records written without it read as the second's start.
	QM int64 `json:"qm,omitempty"`
	U  int   `json:"u,omitempty"`
	P  bool  `json:"p,omitempty"`
	D  bool  `json:"d,omitempty"`
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func millisOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return int64(t.Nanosecond() / int(time.Millisecond))
}

func timeOrZero(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0)
}

func encodeRecord(r Record) string {
	b, _ := json.Marshal(wireRecord{
		S: r.State, L: r.LabelSet, R: r.Runner,
		T: unixOrZero(r.Transition), Q: unixOrZero(r.FirstQueued), QM: millisOf(r.FirstQueued),
		U: r.Unlisted, P: r.Presumed, D: r.Disputed,
	})
	return string(b)
}

func decodeRecord(s string) (Record, error) {
	var w wireRecord
	if err := json.Unmarshal([]byte(s), &w); err != nil {
		return Record{}, err
	}
	if !w.S.Valid() {
		return Record{}, fmt.Errorf("unknown state %q", w.S)
	}
	queued := timeOrZero(w.Q)
	if !queued.IsZero() && w.QM > 0 && w.QM < 1000 {
		queued = queued.Add(time.Duration(w.QM) * time.Millisecond)
	}
	return Record{State: w.S, LabelSet: w.L, Runner: w.R, Transition: timeOrZero(w.T), FirstQueued: queued,
		Unlisted: w.U, Presumed: w.P && w.S == platform.JobCompleted, Disputed: w.D}, nil
}

// maxKeyLength bounds a ConfigMap data key.
const maxKeyLength = 253

// JobKey is the ledger key of a job ID: the ID itself when it is a valid ConfigMap key (GitHub's
// and GitLab's decimal IDs, Buildkite's UUIDs), else "h-" and a SHA-256 of it, so any platform's
// ID fits. A ledger written with decimal GitHub IDs reads back unchanged.
func JobKey(id string) string {
	if len(id) > 0 && len(id) <= maxKeyLength && !strings.HasPrefix(id, "h-") && validKey(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "h-" + hex.EncodeToString(sum[:20])
}

// validKey reports whether s only holds ConfigMap key characters: alphanumerics, '-', '_', '.'.
func validKey(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return s != "." && s != ".."
}

// decodeLedger reads a ConfigMap's data. Entries that do not parse (a hand edit, a future
// format) are skipped rather than failing the pool: the repair loop restores real demand.
func decodeLedger(data map[string]string) map[string]Record {
	out := make(map[string]Record, len(data))
	for k, v := range data {
		r, err := decodeRecord(v)
		if err != nil {
			continue
		}
		out[k] = r
	}
	return out
}

func newDemand(jobs map[string]Record) Demand {
	d := Demand{Busy: map[string]string{}, Jobs: jobs}
	for id, r := range jobs {
		switch {
		case r.State.NeedsRunner():
			d.Queued++
		case r.State == platform.JobInProgress && r.Runner != "":
			d.Busy[r.Runner] = id
		}
	}
	return d
}
