package service

import (
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits protect the endpoints an unattested caller can reach (attest, TPM attest and activate):
// each one costs API-server round trips and signatures, and anyone who can reach the service may
// call them.
type Limits struct {
	// PerClientRate and PerClientBurst are a token bucket per client IP address (requests per
	// second, and how many may come at once). Excess requests get 429 with Retry-After.
	PerClientRate  float64
	PerClientBurst int
	// MaxInFlight caps those requests being served at once, from all clients together; above it
	// requests get 503 with Retry-After.
	MaxInFlight int
}

// Defaults of Limits: a VM attests once, a TPM VM makes two calls, and retries are seconds apart;
// a pool of VMs behind one NAT address still fits in the burst.
const (
	DefaultPerClientRate  = 5
	DefaultPerClientBurst = 20
	DefaultMaxInFlight    = 32
)

// Limits on what one request may send; VMs send a few KiB.
const (
	maxHeaderBytes = 16 << 10
	maxBodyBytes   = 64 << 10
	// maxClients bounds the per-client table; idle entries are dropped when it is full.
	maxClients = 10000
	// clientIdle is how long an unused client entry is kept.
	clientIdle = 10 * time.Minute
)

func (l Limits) withDefaults() Limits {
	if l.PerClientRate <= 0 {
		l.PerClientRate = DefaultPerClientRate
	}
	if l.PerClientBurst <= 0 {
		l.PerClientBurst = DefaultPerClientBurst
	}
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = DefaultMaxInFlight
	}
	return l
}

// limiter enforces Limits.
type limiter struct {
	limits   Limits
	inFlight chan struct{}
	now      func() time.Time

	mu      sync.Mutex
	clients map[string]*clientBucket
}

type clientBucket struct {
	lim      *rate.Limiter
	lastSeen time.Time
}

func newLimiter(l Limits, now func() time.Time) *limiter {
	l = l.withDefaults()
	return &limiter{limits: l, inFlight: make(chan struct{}, l.MaxInFlight), now: now, clients: map[string]*clientBucket{}}
}

// wrap applies the per-client bucket, then the global cap, to h.
func (l *limiter) wrap(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if wait, ok := l.allow(clientIP(r)); !ok {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			writeError(w, http.StatusTooManyRequests, "too many requests from this address")
			return
		}
		select {
		case l.inFlight <- struct{}{}:
			defer func() { <-l.inFlight }()
		default:
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "busy")
			return
		}
		h(w, r)
	}
}

// allow takes a token from ip's bucket, or says how long until one is available.
func (l *limiter) allow(ip string) (time.Duration, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	c, ok := l.clients[ip]
	if !ok {
		if len(l.clients) >= maxClients {
			l.evictIdle(now)
		}
		c = &clientBucket{lim: rate.NewLimiter(rate.Limit(l.limits.PerClientRate), l.limits.PerClientBurst)}
		l.clients[ip] = c
	}
	c.lastSeen = now
	res := c.lim.ReserveN(now, 1)
	if wait := res.DelayFrom(now); wait > 0 {
		res.CancelAt(now)
		return max(wait, time.Second), false
	}
	return 0, true
}

// evictIdle drops clients not seen for clientIdle, or every client when all are recent: a flood
// of addresses then only resets buckets, it cannot grow memory.
func (l *limiter) evictIdle(now time.Time) {
	for ip, c := range l.clients {
		if now.Sub(c.lastSeen) > clientIdle {
			delete(l.clients, ip)
		}
	}
	if len(l.clients) >= maxClients {
		clear(l.clients)
	}
}

// clientIP is the connection's source address. VMs reach the service directly; a proxy in front
// would need its own limits.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// limitBody caps every request body.
func limitBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		h.ServeHTTP(w, r)
	})
}
