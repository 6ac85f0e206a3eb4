package pvesim

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Fault makes matching API requests misbehave. A fault matches requests by
// Endpoint, "METHOD /pve/path/{template}" exactly as the PVE schema spells it
// (e.g. "POST /nodes/{node}/qemu/{vmid}/clone"); an empty Endpoint matches
// every API request. Which matching requests are hit: the next Count of them
// (then the fault removes itself), or each with probability Rate (seeded by
// Config.Seed), or, with neither set, all of them.
type Fault struct {
	Endpoint string  `json:"endpoint,omitempty"`
	Rate     float64 `json:"rate,omitempty"`
	Count    int     `json:"count,omitempty"`

	// Status and Message answer the request with this HTTP status and reason
	// phrase, e.g. 500 "VM 105 is locked (clone)" or 596 "Connection timed out".
	// Errors adds PVE's per-parameter map (for 400s).
	Status  int               `json:"status,omitempty"`
	Message string            `json:"message,omitempty"`
	Errors  map[string]string `json:"errors,omitempty"`
	// Latency delays the request before it is handled (or answered with Status).
	Latency time.Duration `json:"latency,omitempty"`
	// Hang never answers: the request stays open until the client gives up.
	Hang bool `json:"hang,omitempty"`
	// TaskExitStatus lets the request succeed but makes the task it starts
	// end with this exit status (e.g. "clone failed: storage full").
	TaskExitStatus string `json:"taskExitStatus,omitempty"`
	// TaskDuration overrides how long the started task runs.
	TaskDuration time.Duration `json:"taskDuration,omitempty"`
	// LoseResponse lets the request be carried out (a clone starts, a VM is destroyed) and then
	// closes the connection without an answer, as a proxy or network that drops the response
	// does: the client cannot tell whether its request took effect.
	LoseResponse bool `json:"loseResponse,omitempty"`
	// OmitNodes makes a GET /cluster/resources answer leave out the VMs of these nodes, as an
	// incomplete listing does (a node whose status did not reach the cluster in time).
	OmitNodes []string `json:"omitNodes,omitempty"`
}

type faultState struct {
	id string
	Fault
	remaining int
}

// isTaskFault reports whether the fault acts on the task rather than the answer.
func (f *Fault) isTaskFault() bool {
	return f.Status == 0 && !f.Hang && f.Latency == 0 && (f.TaskExitStatus != "" || f.TaskDuration > 0)
}

// isLostResponseFault reports whether the fault drops the answer of a request carried out.
func (f *Fault) isLostResponseFault() bool {
	return f.LoseResponse && f.Status == 0 && !f.Hang && f.Latency == 0
}

// isListingFault reports whether the fault shapes a listing's content rather than the answer.
func (f *Fault) isListingFault() bool {
	return f.Status == 0 && !f.Hang && f.Latency == 0 && len(f.OmitNodes) > 0
}

// InjectFault installs f and returns its ID (for the admin endpoint's DELETE).
func (s *Simulator) InjectFault(f Fault) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faultSeq++
	fs := &faultState{id: fmt.Sprintf("f%d", s.faultSeq), Fault: f, remaining: f.Count}
	s.faults = append(s.faults, fs)
	return fs.id
}

// RemoveFault removes one fault by ID.
func (s *Simulator) RemoveFault(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, f := range s.faults {
		if f.id == id {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
			return true
		}
	}
	return false
}

// ClearFaults removes every fault.
func (s *Simulator) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Faults lists the installed faults by ID.
func (s *Simulator) Faults() map[string]Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]Fault{}
	for _, f := range s.faults {
		c := f.Fault
		if f.Count > 0 {
			c.Count = f.remaining
		}
		out[f.id] = c
	}
	return out
}

// hit decides whether fault f applies to this request, consuming a Count.
// Called with s.mu held.
func (s *Simulator) hit(f *faultState, key string) bool {
	if f.Endpoint != "" && f.Endpoint != key {
		return false
	}
	switch {
	case f.Count > 0:
		if f.remaining <= 0 {
			return false
		}
		f.remaining--
		if f.remaining == 0 {
			s.dropFault(f)
		}
		return true
	case f.Rate > 0:
		return s.rng.Float64() < f.Rate
	default:
		return true
	}
}

func (s *Simulator) dropFault(f *faultState) {
	for i, x := range s.faults {
		if x == f {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
			return
		}
	}
}

// applyFaults runs the first answer-level fault that hits the request. It
// returns handled=true when the request must not be processed further (with
// apiErr to answer, or nil when the client already went away).
func (s *Simulator) applyFaults(w http.ResponseWriter, r *http.Request, key string) (*apiError, bool) {
	s.mu.Lock()
	var hitFault *Fault
	for _, f := range append([]*faultState(nil), s.faults...) {
		if f.isTaskFault() || f.isListingFault() || f.isLostResponseFault() {
			continue
		}
		if s.hit(f, key) {
			c := f.Fault
			hitFault = &c
			break
		}
	}
	s.mu.Unlock()
	if hitFault == nil {
		return nil, false
	}
	if hitFault.Latency > 0 {
		select {
		case <-time.After(hitFault.Latency):
		case <-r.Context().Done():
			return nil, true
		case <-s.closing:
			return nil, true
		}
	}
	if hitFault.Hang {
		// Read the body first: net/http notices a client that gives up (and ends r.Context())
		// only once the request body was read, so a hung POST would otherwise hold its pveproxy
		// worker for ever.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-s.closing:
		}
		return nil, true
	}
	if hitFault.Status == 0 {
		return nil, false
	}
	msg := hitFault.Message
	if msg == "" {
		msg = http.StatusText(hitFault.Status)
	}
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	return &apiError{Code: hitFault.Status, Message: msg, Errors: hitFault.Errors}, true
}

// responseLost reports whether a lost-response fault hits the request to key, which was carried
// out: its answer must not be sent.
func (s *Simulator) responseLost(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range append([]*faultState(nil), s.faults...) {
		if f.isLostResponseFault() && s.hit(f, key) {
			return true
		}
	}
	return false
}

// omittedNodes returns the nodes a listing fault hides from a listing answered for key. Called
// with s.mu held.
func (s *Simulator) omittedNodes(key string) map[string]bool {
	out := map[string]bool{}
	for _, f := range append([]*faultState(nil), s.faults...) {
		if !f.isListingFault() || !s.hit(f, key) {
			continue
		}
		for _, n := range f.OmitNodes {
			out[n] = true
		}
	}
	return out
}

// taskFault returns the exit status and duration a task-level fault imposes
// on a task started by a request to key. Called with s.mu held.
func (s *Simulator) taskFault(key string) (string, time.Duration) {
	for _, f := range append([]*faultState(nil), s.faults...) {
		if !f.isTaskFault() || !s.hit(f, key) {
			continue
		}
		return f.TaskExitStatus, f.TaskDuration
	}
	return "", 0
}

func (s *Simulator) countRequest(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests[key]++
}

// Requests returns how many API requests arrived per "METHOD /path/{template}"
// (unknown paths are counted by their literal path).
func (s *Simulator) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.requests))
	for k, v := range s.requests {
		out[k] = v
	}
	return out
}

// ResetRequests zeroes the request counters.
func (s *Simulator) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = map[string]int{}
}
