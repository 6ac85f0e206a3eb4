package demand

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Record is what the ledger knows about one workflow job.
type Record struct {
	// State is queued, in_progress or completed; waiting is stored as queued because both
	// need a runner and neither is forward of the other.
	State platform.JobState
	// LabelSet is platform.LabelSetKey of the job's runs-on labels.
	LabelSet string
	// Runner is the runner that took the job, once one did.
	Runner string
	// Transition is when the job last moved forward (second precision).
	Transition time.Time
	// FirstQueued is when the job was first seen queued; zero if it was first seen running.
	FirstQueued time.Time
}

// Demand is a snapshot of one pool's ledger.
type Demand struct {
	// Queued counts jobs queued or waiting.
	Queued int
	// Busy maps runner name to job id for jobs in progress.
	Busy map[string]int64
	// Jobs is every retained record, completed ones included.
	Jobs map[int64]Record
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
}

func storedState(s platform.JobState) platform.JobState {
	if s == platform.JobWaiting {
		return platform.JobQueued
	}
	return s
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func timeOrZero(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0)
}

func encodeRecord(r Record) string {
	b, _ := json.Marshal(wireRecord{
		S: storedState(r.State), L: r.LabelSet, R: r.Runner,
		T: unixOrZero(r.Transition), Q: unixOrZero(r.FirstQueued),
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
	return Record{State: w.S, LabelSet: w.L, Runner: w.R, Transition: timeOrZero(w.T), FirstQueued: timeOrZero(w.Q)}, nil
}

func jobKey(id int64) string { return strconv.FormatInt(id, 10) }

// decodeLedger reads a ConfigMap's data. Entries that do not parse (a hand edit, a future
// format) are skipped rather than failing the pool: the repair loop restores real demand.
func decodeLedger(data map[string]string) map[int64]Record {
	out := make(map[int64]Record, len(data))
	for k, v := range data {
		id, err := strconv.ParseInt(k, 10, 64)
		if err != nil {
			continue
		}
		r, err := decodeRecord(v)
		if err != nil {
			continue
		}
		out[id] = r
	}
	return out
}

func newDemand(jobs map[int64]Record) Demand {
	d := Demand{Busy: map[string]int64{}, Jobs: jobs}
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
