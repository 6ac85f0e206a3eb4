package agent

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestCallWaitsOutRateLimits: a VM told to slow down (429 or 503 with Retry-After) comes back
// after the time asked and succeeds, instead of taking the answer as a final refusal and powering
// off.
func TestCallWaitsOutRateLimits(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			g := NewWithT(t)
			var calls atomic.Int32
			srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if calls.Add(1) == 1 {
					w.Header().Set("Retry-After", "1")
					w.WriteHeader(status)
					return
				}
				_, _ = w.Write([]byte(`{"spiffeID":"spiffe://td/x"}`))
			}))
			t.Cleanup(srv.Close)
			a := &Agent{cfg: &Config{ServiceURL: srv.URL}, opts: Options{RetryInterval: 10 * time.Millisecond},
				log: slog.New(slog.DiscardHandler)}
			var out struct {
				SPIFFEID string `json:"spiffeID"`
			}
			start := time.Now()
			err := a.call(context.Background(), srv.Client(), http.MethodPost, "/v1/attest", []byte(`{}`), &out, time.Now().Add(30*time.Second))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(out.SPIFFEID).To(Equal("spiffe://td/x"))
			g.Expect(calls.Load()).To(BeEquivalentTo(2))
			g.Expect(time.Since(start)).To(BeNumerically(">=", time.Second), "Retry-After is honoured")
		})
	}
}
