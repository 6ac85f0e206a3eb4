package demand

import (
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

func TestLedgerStaysUnderTheObjectSizeLimit(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1_800_000_000, 0)
	s := &Store{Now: func() time.Time { return now }}
	// 8 KiB label sets: 150 records would make a 1.2 MiB ConfigMap.
	longLabels := strings.Repeat("l", 8<<10)
	jobs := map[string]Record{}
	for id := int64(1); id <= 150; id++ {
		jobs[strconv.FormatInt(id, 10)] = Record{State: platform.JobCompleted, LabelSet: longLabels, Transition: now.Add(time.Duration(id) * time.Second)}
	}
	jobs["1000"] = Record{State: platform.JobQueued, LabelSet: longLabels, Transition: now}

	data, err := s.encodeLedger(jobs, 150)
	g.Expect(err).NotTo(HaveOccurred())
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	g.Expect(size).To(BeNumerically("<=", maxLedgerBytes))
	g.Expect(data).To(HaveKey("1000"), "queued jobs are kept")
	g.Expect(data).To(HaveKey("150"), "the newest completed records are kept")
	g.Expect(data).NotTo(HaveKey("1"), "the oldest completed records go first")

	// All queued: growing further is refused.
	queued := map[string]Record{}
	for id := int64(1); id <= 120; id++ {
		queued[strconv.FormatInt(id, 10)] = Record{State: platform.JobQueued, LabelSet: longLabels, Transition: now}
	}
	_, err = s.encodeLedger(queued, 119)
	g.Expect(err).To(MatchError(ErrLedgerFull))
}
