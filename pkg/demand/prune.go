package demand

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// maxLedgerBytes keeps a ledger well inside the API server's 1 MiB object limit whatever the
// record count, since label sets and runner names have no small bound of their own.
const maxLedgerBytes = 900 << 10

// encodeLedger prunes jobs and returns the ConfigMap data. Completed records older than the
// retention period go first; then, while the ledger is over MaxRecords or maxLedgerBytes, the
// oldest completed records. Completed records only serve dedupe; queued and running ones are
// demand and are never dropped here. If the ledger is still over its bounds and this write made
// it grow (before is the record count read), the write is refused with ErrLedgerFull.
func (s *Store) encodeLedger(jobs map[string]Record, before int) (map[string]string, error) {
	cutoff := s.now().Add(-s.retention())
	data := make(map[string]string, len(jobs))
	size := 0
	var completed []string
	for id, r := range jobs {
		if r.State == platform.JobCompleted {
			if r.Transition.Before(cutoff) {
				delete(jobs, id)
				continue
			}
			completed = append(completed, id)
		}
		k, v := id, encodeRecord(r)
		data[k] = v
		size += len(k) + len(v)
	}
	limit := s.maxRecords()
	fits := func() bool { return len(data) <= limit && size <= maxLedgerBytes }
	if fits() {
		return data, nil
	}
	slices.SortFunc(completed, func(a, b string) int {
		if c := jobs[a].Transition.Compare(jobs[b].Transition); c != 0 {
			return c
		}
		return compareKeys(a, b)
	})
	for _, id := range completed {
		if fits() {
			break
		}
		k := id
		size -= len(k) + len(data[k])
		delete(data, k)
		delete(jobs, id)
	}
	if !fits() && len(data) > before {
		return nil, fmt.Errorf("%w: %d records (%d bytes), all queued or running (limits %d records, %d bytes)",
			ErrLedgerFull, len(data), size, limit, maxLedgerBytes)
	}
	return data, nil
}

// compareKeys orders job keys numerically when both are decimal (GitHub's and GitLab's IDs grow
// with time), else as strings.
func compareKeys(a, b string) int {
	if len(a) != len(b) && isDecimal(a) && isDecimal(b) {
		return cmp.Compare(len(a), len(b))
	}
	return strings.Compare(a, b)
}

func isDecimal(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
