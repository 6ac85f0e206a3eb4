package fakebuildkite

import (
	"net/http"
	"time"
)

// Fault makes the next Times requests to an endpoint fail before authentication, as a Buildkite
// outage or throttle would: after Delay, with Status. A Fault with only a Delay slows the
// requests down and then serves them normally.
type Fault struct {
	Status  int
	Message string
	Times   int
	Delay   time.Duration
	// RateLimited answers 429 with RateLimit-Remaining: 0 and RateLimit-Reset: RetryAfter
	// (default one minute), as an exhausted budget does.
	RateLimited bool
	RetryAfter  time.Duration
}

// InjectFault queues a fault for an endpoint pattern (one of the Endpoint constants).
func (s *Server) InjectFault(endpoint string, f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	if f.RateLimited && f.Status == 0 {
		f.Status = http.StatusTooManyRequests
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[endpoint] = append(s.faults[endpoint], f)
}

// FailNext makes the next times requests to endpoint fail with status.
func (s *Server) FailNext(endpoint string, times, status int) {
	s.InjectFault(endpoint, Fault{Status: status, Times: times})
}

func (s *Server) takeFault(endpoint string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	queue := s.faults[endpoint]
	if len(queue) == 0 {
		return Fault{}, false
	}
	f := queue[0]
	queue[0].Times--
	if queue[0].Times <= 0 {
		queue = queue[1:]
	}
	s.faults[endpoint] = queue
	return f, true
}

// serveFault applies a fault and reports whether it answered the request.
func (s *Server) serveFault(w http.ResponseWriter, r *http.Request, f Fault) bool {
	if f.Delay > 0 {
		select {
		case <-time.After(f.Delay):
		case <-r.Context().Done():
			return true
		}
	}
	if f.Status == 0 {
		return false
	}
	msg := f.Message
	if f.RateLimited {
		wait := f.RetryAfter
		if wait == 0 {
			wait = time.Minute
		}
		resetIn := setRateHeaders(w, s.opts.RateLimit, 0, wait)
		if msg == "" {
			writeRateLimited(w, s.opts.RateLimit, s.opts.RateLimit+1, resetIn)
			return true
		}
	}
	if msg == "" {
		msg = http.StatusText(f.Status)
	}
	writeError(w, f.Status, msg)
	return true
}

func (s *Server) countRequest(endpoint string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[endpoint]++
}

// Requests returns how many requests reached an endpoint pattern (faulted ones included).
func (s *Server) Requests(endpoint string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[endpoint]
}
