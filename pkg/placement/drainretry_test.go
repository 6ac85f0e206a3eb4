package placement

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestDrainRetryBacksOff: the wait after each failed attempt doubles up to the cap, and after the
// last attempt the drain gives up; zero fields take the defaults.
func TestDrainRetryBacksOff(t *testing.T) {
	failed := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	r := DrainRetry{Initial: time.Second, Max: 5 * time.Second, Attempts: 5}
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 4: 5 * time.Second} {
		t.Run("", func(t *testing.T) {
			at, giveUp := r.Next(attempt, failed)
			NewWithT(t).Expect(giveUp).To(BeFalse())
			NewWithT(t).Expect(at.Sub(failed)).To(Equal(want), "after attempt %d", attempt)
		})
	}
	g := NewWithT(t)
	_, giveUp := r.Next(5, failed)
	g.Expect(giveUp).To(BeTrue(), "five attempts, then no more")
	_, giveUp = r.Next(7, failed)
	g.Expect(giveUp).To(BeTrue())

	var defaults DrainRetry
	g.Expect(defaults.MaxAttempts()).To(Equal(DefaultDrainRetryAttempts))
	at, _ := defaults.Next(1, failed)
	g.Expect(at.Sub(failed)).To(Equal(DefaultDrainRetryInitial))
	at, _ = defaults.Next(4, failed)
	g.Expect(at.Sub(failed)).To(Equal(4 * time.Minute))
	_, giveUp = defaults.Next(DefaultDrainRetryAttempts, failed)
	g.Expect(giveUp).To(BeTrue())
}
