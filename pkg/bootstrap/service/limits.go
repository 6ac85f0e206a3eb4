package service

import (
	"math"
	"net"
	"net/http"
	"net/netip"
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
	// maxClients bounds the per-client table. When it is full, only buckets that have refilled
	// are dropped (a fresh bucket is no different); clients it cannot hold share one bucket.
	maxClients = 10000
	// sweepEvery spaces the scans of a full table for refilled buckets, so a flood of new
	// addresses cannot make every request walk the whole table.
	sweepEvery = time.Second
	// ipv6ClientBits is the prefix an IPv6 client is known by: anyone holding one address
	// usually holds its whole /64.
	ipv6ClientBits = 64
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
	clients map[string]*rate.Limiter
	// overflow is the bucket every client shares while the table is full of buckets still in
	// use: never a fresh bucket per new address, so a flood of addresses earns no extra tokens.
	overflow  *rate.Limiter
	lastSweep time.Time
}

func newLimiter(l Limits, now func() time.Time) *limiter {
	l = l.withDefaults()
	return &limiter{limits: l, inFlight: make(chan struct{}, l.MaxInFlight), now: now,
		clients: map[string]*rate.Limiter{}, overflow: l.newBucket()}
}

func (l Limits) newBucket() *rate.Limiter {
	return rate.NewLimiter(rate.Limit(l.PerClientRate), l.PerClientBurst)
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

// allow takes a token from the bucket of addr's client, or says how long until one is available.
func (l *limiter) allow(addr string) (time.Duration, bool) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	res := l.bucket(clientKey(addr), now).ReserveN(now, 1)
	if wait := res.DelayFrom(now); wait > 0 {
		res.CancelAt(now)
		return max(wait, time.Second), false
	}
	return 0, true
}

// bucket returns the client's bucket. A client not in a full table gets a bucket in it once the
// table has room again; until then it shares the overflow bucket. A bucket in use is never
// dropped: dropping it would hand its client a fresh burst, and the client who forced the drop
// could be the very one it limits.
func (l *limiter) bucket(key string, now time.Time) *rate.Limiter {
	if b, ok := l.clients[key]; ok {
		return b
	}
	if len(l.clients) >= maxClients && now.Sub(l.lastSweep) >= sweepEvery {
		l.lastSweep = now
		l.dropRefilled(now)
	}
	if len(l.clients) >= maxClients {
		return l.overflow
	}
	b := l.limits.newBucket()
	l.clients[key] = b
	return b
}

// dropRefilled forgets the clients whose bucket is full again: a new bucket would be the same.
func (l *limiter) dropRefilled(now time.Time) {
	burst := float64(l.limits.PerClientBurst)
	for key, b := range l.clients {
		if b.TokensAt(now) >= burst {
			delete(l.clients, key)
		}
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

// clientKey is what one client's requests are counted under: its IPv4 address, or the /64 of
// its IPv6 address, since a sender given one IPv6 address can usually use all 2^64 of its prefix.
func clientKey(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap()
	if ip.Is4() {
		return ip.String()
	}
	return netip.PrefixFrom(ip.WithZone(""), ipv6ClientBits).Masked().String()
}

// limitBody caps every request body.
func limitBody(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		h.ServeHTTP(w, r)
	})
}
