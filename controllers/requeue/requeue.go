// Package requeue holds the retry delays controllers share.
package requeue

import "time"

// Backoff is the delay after n consecutive failures: 5s doubling up to 5m.
func Backoff(n int32) time.Duration {
	d := 5 * time.Second
	for i := int32(1); i < n && d < 5*time.Minute; i++ {
		d *= 2
	}
	return min(d, 5*time.Minute)
}
