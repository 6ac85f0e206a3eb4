package scaling

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkDecide is the planning cost of one RunnerPool reconcile for pools of growing size.
func BenchmarkDecide(b *testing.B) {
	now := t0.Add(48 * time.Hour)
	p := Policy{Min: 1, Max: 5000, Idle: 5, IdleTTL: 30 * time.Minute, MaxLifetime: 24 * time.Hour, BootstrapTimeout: 10 * time.Minute}
	for _, n := range []int{10, 100, 1000} {
		runners := make([]Runner, n)
		for i := range runners {
			created := now.Add(-time.Duration(i) * time.Minute)
			runners[i] = Runner{Name: fmt.Sprintf("r%d", i), Created: created, Ready: i%3 != 0, ReadySince: created.Add(time.Minute), Busy: i%2 == 0}
		}
		b.Run(fmt.Sprintf("runners=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Decide(p, Demand{Queued: n / 4, Busy: n / 2}, runners, now)
			}
		})
	}
}
