package webhook

import (
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
)

// Results of deliveries refused by the load limits, as webhook delivery metrics.
const (
	metricBusy      = "busy"
	metricThrottled = "throttled"
)

// limiter bounds the requests whose bodies are being read or handled at once, overall and per
// source. Anyone on the internet can reach the receiver, and a request holds up to MaxBodyBytes of
// memory while its body arrives: without a bound, a few hundred senders would exhaust the
// manager's memory and every controller with it.
//
// A bound alone is a lock: a handful of addresses sending slow bodies would hold every slot, and
// every genuine delivery would be refused. So a full limiter gives a slot to a newcomer by taking
// one from a request still reading its body: from any claimed request if the newcomer's token is
// already proven, and otherwise from a source holding more slots than the newcomer's, its oldest
// request first. Whoever opens many slow requests loses them to those who open few, and the
// platform, which sends one delivery at a time from wherever it sends, always gets a slot.
type limiter struct {
	max, perSource int

	mu    sync.Mutex
	slots map[*slot]struct{}
	// claimed counts each source's claimed slots.
	claimed map[string]int
}

func newLimiter(max, perSource int) *limiter {
	return &limiter{max: max, perSource: perSource, slots: map[*slot]struct{}{}, claimed: map[string]int{}}
}

// evictionWait bounds how long a newcomer waits for the request it took a slot from to let go of
// its body; that request's read is cut at once, so this is only a safeguard.
const evictionWait = time.Second

// source is who a request counts against: the peer address without the port, or the /64 of an
// IPv6 peer, since whoever holds one IPv6 address usually holds its whole /64. Behind a proxy it
// is the proxy's; forwarded headers are not trusted, since anyone can set them.
func source(req *http.Request) string {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		host = req.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if ip = ip.Unmap(); ip.Is4() {
		return ip.String()
	}
	return netip.PrefixFrom(ip.WithZone(""), 64).Masked().String()
}

// acquire takes a slot for req, or answers 429 (this source has too many claimed requests in
// flight) or 503 (the receiver has too many, and none it may take) and returns nil.
func (r *Receiver) acquire(w http.ResponseWriter, req *http.Request, ln lane) *slot {
	l := r.limits
	s := newSlot(w, source(req), ln, r.now(), r.cfg.Timeouts)
	l.mu.Lock()
	if ln == laneClaimed && l.perSource > 0 && l.claimed[s.source] >= l.perSource {
		l.mu.Unlock()
		r.stats.throttled.Add(1)
		metrics.WebhookDelivery(metricThrottled)
		refuseUnread(w)
		http.Error(w, "too many concurrent requests from your address", http.StatusTooManyRequests)
		return nil
	}
	var victim *slot
	if len(l.slots) >= l.max {
		if victim = l.victimFor(s); victim == nil {
			l.mu.Unlock()
			r.refuseBusy(w)
			return nil
		}
		l.remove(victim)
	}
	l.slots[s] = struct{}{}
	if ln == laneClaimed {
		l.claimed[s.source]++
	}
	l.mu.Unlock()
	s.release = func() {
		s.finish()
		l.mu.Lock()
		if _, ok := l.slots[s]; ok {
			l.remove(s)
		}
		l.mu.Unlock()
	}
	if victim != nil {
		victim.evict()
		t := time.NewTimer(evictionWait)
		defer t.Stop()
		select {
		case <-victim.gone:
		case <-t.C:
		}
	}
	return s
}

// victimFor picks the slot newcomer may take, or nil: a claimed request still reading its body,
// of the source holding the most claimed slots, the oldest first. A claimed newcomer may only
// take from a source that holds more slots than its own, so sources tend to equal shares and
// an attacker's many slow requests are what gives way.
func (l *limiter) victimFor(newcomer *slot) *slot {
	least := 1 // a proven newcomer may take from any claimed request
	if newcomer.lane == laneClaimed {
		least = l.claimed[newcomer.source] + 1
	}
	var victim *slot
	victimShare := 0
	for s := range l.slots {
		share := l.claimed[s.source]
		if s.lane != laneClaimed || share < least || !s.evictable() {
			continue
		}
		if victim == nil || share > victimShare || (share == victimShare && s.started.Before(victim.started)) {
			victim, victimShare = s, share
		}
	}
	return victim
}

func (l *limiter) remove(s *slot) {
	delete(l.slots, s)
	if s.lane != laneClaimed {
		return
	}
	if l.claimed[s.source]--; l.claimed[s.source] <= 0 {
		delete(l.claimed, s.source)
	}
}

func (r *Receiver) refuseBusy(w http.ResponseWriter) {
	r.stats.busy.Add(1)
	metrics.WebhookDelivery(metricBusy)
	refuseUnread(w)
	http.Error(w, "receiver busy", http.StatusServiceUnavailable)
}

// retryAfterSeconds is what refused senders are told to wait.
const retryAfterSeconds = 1

// drainWait is how long the server may go on reading the body of a request refused unread, so
// that a sender still writing a small body reads the answer rather than a reset connection.
const drainWait = 500 * time.Millisecond

// refuseUnread prepares the answer to a busy receiver's refusal of a request whose body is not read.
func refuseUnread(w http.ResponseWriter) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	closeUnread(w)
}

// closeUnread closes the connection after the answer. Before it closes, the server reads what
// is left of the body (up to 256 KiB) for as long as the read deadline allows, and a slow
// sender would hold the connection and its goroutine until the read timeout: drainWait is
// enough for a sender that writes at any ordinary pace.
func closeUnread(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(drainWait))
}
