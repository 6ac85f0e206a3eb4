package webhook

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

var (
	// errEvicted ends the read of a body whose slot a newcomer took.
	errEvicted = errors.New("the slot was given to another request")
	// errTooSlow ends the read of a body that fell behind MinBodyRate.
	errTooSlow = errors.New("the body arrives too slowly")
)

// slot is one request admitted to have its body read. While the body arrives its read deadline
// follows the bytes received: BodyGrace, plus a second for every MinBodyRate bytes, never later
// than Read. A platform sends a whole delivery within milliseconds; a sender that trickles is cut
// soon after the grace period instead of holding its slot for the whole read timeout.
type slot struct {
	source  string
	lane    lane
	started time.Time
	t       ServerTimeouts
	rc      *http.ResponseController
	// gone is closed once the request has let go of its body.
	gone chan struct{}
	// release gives the slot back; the limiter sets it.
	release  func()
	once     sync.Once
	deadline time.Time

	mu sync.Mutex
	// paced: the connection's read deadline can be moved (not so under a test recorder); only
	// then can the read be cut, and only then may another request take the slot.
	paced    bool
	reading  bool
	evicted  bool
	finished bool
}

func newSlot(w http.ResponseWriter, source string, ln lane, now time.Time, t ServerTimeouts) *slot {
	s := &slot{source: source, lane: ln, started: now, t: t, rc: http.NewResponseController(w), gone: make(chan struct{}), reading: true}
	s.deadline = s.deadlineAfter(0)
	s.paced = s.rc.SetReadDeadline(s.deadline) == nil
	return s
}

// deadlineAfter is when the rest of the body must have arrived, n bytes of it having come.
func (s *slot) deadlineAfter(n int64) time.Time {
	d := s.t.BodyGrace + time.Duration(n*int64(time.Second)/s.t.MinBodyRate)
	return s.started.Add(min(d, s.t.Read))
}

func (s *slot) evictable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paced && s.reading && !s.evicted
}

// evict cuts the body's read at once; the request answers 503 and lets go of its slot.
func (s *slot) evict() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.reading || s.finished {
		return // its body is read: it ends within moments anyway
	}
	s.evicted = true
	_ = s.rc.SetReadDeadline(time.Unix(1, 0))
}

// pace moves the read deadline on as n bytes have come, unless the slot was taken.
func (s *slot) pace(n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.evicted {
		return errEvicted
	}
	if s.paced {
		s.deadline = s.deadlineAfter(n)
		_ = s.rc.SetReadDeadline(s.deadline)
	}
	return nil
}

// doneReading ends the pacing; a body read in full leaves the connection to the server's own
// deadlines for the next request.
func (s *slot) doneReading(complete bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reading = false
	if complete && s.paced && !s.evicted {
		_ = s.rc.SetReadDeadline(time.Time{})
	}
}

// finish is called once the request no longer holds its body.
func (s *slot) finish() {
	s.once.Do(func() {
		s.mu.Lock()
		s.finished = true
		s.mu.Unlock()
		close(s.gone)
	})
}

// pacedBody reads a body through its slot's moving deadline.
type pacedBody struct {
	body io.ReadCloser
	slot *slot
	n    int64
}

func (p *pacedBody) Close() error { return p.body.Close() }

func (p *pacedBody) Read(b []byte) (int, error) {
	if err := p.slot.pace(p.n); err != nil {
		return 0, err
	}
	n, err := p.body.Read(b)
	p.n += int64(n)
	return n, err
}

// readBody reads req's body within MaxBodyBytes and the slot's pace. Its errors are
// *http.MaxBytesError, errEvicted, errTooSlow, or what the connection reported.
func (r *Receiver) readBody(w http.ResponseWriter, req *http.Request, s *slot) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, &pacedBody{body: req.Body, slot: s}, r.cfg.MaxBodyBytes))
	s.doneReading(err == nil)
	if err == nil {
		return body, nil
	}
	s.mu.Lock()
	evicted := s.evicted
	s.mu.Unlock()
	var ne net.Error
	switch {
	case evicted:
		return nil, errEvicted
	case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return nil, errTooSlow
	}
	return nil, err
}
