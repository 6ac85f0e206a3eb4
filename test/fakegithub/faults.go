package fakegithub

import (
	"net/http"
	"strconv"
	"time"
)

// Fault makes the next Times requests to an endpoint fail before authentication, as a GitHub
// outage or throttle would: after Delay (a slow GitHub), with Status. A Fault with only a Delay
// slows the requests down and then serves them normally.
type Fault struct {
	Status  int
	Message string
	Times   int
	Delay   time.Duration
	// RateLimited answers like an exhausted primary rate limit (X-RateLimit-Remaining: 0, reset
	// after RetryAfter or one hour); Status defaults to 403.
	RateLimited bool
	// RetryAfter, without RateLimited, sets Retry-After as GitHub's secondary rate limit does.
	RetryAfter time.Duration
}

// InjectFault queues a fault for an endpoint pattern (one of the Endpoint constants).
func (s *Server) InjectFault(endpoint string, f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	if f.Status == 0 && (f.RateLimited || f.RetryAfter > 0) {
		f.Status = http.StatusForbidden
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[endpoint] = append(s.faults[endpoint], f)
}

// FailNext makes the next times requests to endpoint fail with status.
func (s *Server) FailNext(endpoint string, times, status int) {
	s.InjectFault(endpoint, Fault{Status: status, Times: times})
}

// ClearFaults drops every fault not yet served.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = map[string][]Fault{}
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
	s.writeFault(w, f)
	return true
}

func (s *Server) writeFault(w http.ResponseWriter, f Fault) {
	switch {
	case f.RateLimited:
		wait := f.RetryAfter
		if wait == 0 {
			wait = time.Hour
		}
		setRateHeaders(w, s.opts.RateLimit, 0, s.now().Add(wait))
		msg := f.Message
		if msg == "" {
			msg = "API rate limit exceeded."
		}
		writeErrorDoc(w, f.Status, msg, "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api")
	case f.RetryAfter > 0:
		w.Header().Set("Retry-After", strconv.Itoa(int(f.RetryAfter.Seconds())))
		msg := f.Message
		if msg == "" {
			msg = "You have exceeded a secondary rate limit."
		}
		writeErrorDoc(w, f.Status, msg, "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits")
	default:
		msg := f.Message
		if msg == "" {
			msg = http.StatusText(f.Status)
		}
		writeError(w, f.Status, msg)
	}
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

// RequestCounts returns a copy of every endpoint's request count.
func (s *Server) RequestCounts() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.requests))
	for k, v := range s.requests {
		out[k] = v
	}
	return out
}
