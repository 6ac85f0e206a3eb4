package demand

import (
	"fmt"
	"slices"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// prune drops completed records older than the retention period, then, while the ledger is
// over its bound, the oldest completed records. Completed records only serve dedupe, so they go
// first; queued and running ones are demand and are never dropped here. If the ledger is still
// over its bound and this write made it grow, the write is refused with ErrLedgerFull.
func (s *Store) prune(jobs map[int64]Record, before int) error {
	cutoff := s.now().Add(-s.retention())
	var completed []int64
	for id, r := range jobs {
		if r.State != platform.JobCompleted {
			continue
		}
		if r.Transition.Before(cutoff) {
			delete(jobs, id)
			continue
		}
		completed = append(completed, id)
	}
	limit := s.maxRecords()
	if len(jobs) <= limit {
		return nil
	}
	slices.SortFunc(completed, func(a, b int64) int {
		if c := jobs[a].Transition.Compare(jobs[b].Transition); c != 0 {
			return c
		}
		return int(min(max(a-b, -1), 1))
	})
	for _, id := range completed {
		if len(jobs) <= limit {
			break
		}
		delete(jobs, id)
	}
	if len(jobs) > limit && len(jobs) > before {
		return fmt.Errorf("%w: %d records, all queued or running (limit %d)", ErrLedgerFull, len(jobs), limit)
	}
	return nil
}
