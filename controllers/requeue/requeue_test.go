package requeue

import (
	"testing"
	"time"
)

// TestBackoffDoublesUpToFiveMinutes: 5 s after the first failure, doubling, never beyond 5 min.
func TestBackoffDoublesUpToFiveMinutes(t *testing.T) {
	for n, want := range map[int32]time.Duration{0: 5 * time.Second, 1: 5 * time.Second, 2: 10 * time.Second, 3: 20 * time.Second,
		6: 160 * time.Second, 7: 5 * time.Minute, 40: 5 * time.Minute} {
		if got := Backoff(n); got != want {
			t.Errorf("Backoff(%d) = %s, want %s", n, got, want)
		}
	}
}
