package github

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// maxCachedResponses bounds the conditional-request cache of one installation: a poll of N
// repositories keeps about 3N+runs entries, so 4096 covers a large organization.
const maxCachedResponses = 4096

// maxCachedBody bounds one cached response body; larger answers are not cached.
const maxCachedBody = 1 << 20

// cachedResponse is the last 200 answer to one GET URL with its ETag.
type cachedResponse struct {
	etag   string
	header http.Header
	body   []byte
}

// conditionalTransport makes every GET a conditional request: it sends If-None-Match with the
// ETag of the last 200 answer to the same URL, and turns GitHub's 304 Not Modified (which costs
// no rate limit) back into that answer, so go-github sees the same data. Only successful answers
// are cached; the cache is per installation, so one installation never sees another's data.
type conditionalTransport struct {
	next http.RoundTripper

	mu      sync.Mutex
	entries map[string]cachedResponse

	notModified atomic.Int64
}

func newConditionalTransport(next http.RoundTripper) *conditionalTransport {
	return &conditionalTransport{next: next, entries: map[string]cachedResponse{}}
}

func (t *conditionalTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.Header.Get("If-None-Match") != "" {
		return t.next.RoundTrip(req)
	}
	key := req.URL.String()
	t.mu.Lock()
	cached, ok := t.entries[key]
	t.mu.Unlock()
	if ok {
		req = req.Clone(req.Context())
		req.Header.Set("If-None-Match", cached.etag)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && ok:
		t.notModified.Add(1)
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxCachedBody))
		_ = resp.Body.Close()
		header := cached.header.Clone()
		// The rate-limit headers of the 304 are current; the cached ones are not.
		for _, h := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Used", "X-RateLimit-Reset", "Date"} {
			if v := resp.Header.Get(h); v != "" {
				header.Set(h, v)
			}
		}
		header.Set("X-HyperFleet-Not-Modified", "1")
		return &http.Response{
			Status: "200 OK", StatusCode: http.StatusOK, Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
			Header: header, Body: io.NopCloser(bytes.NewReader(cached.body)), ContentLength: int64(len(cached.body)), Request: resp.Request,
		}, nil
	case resp.StatusCode == http.StatusOK && resp.Header.Get("ETag") != "":
		body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxCachedBody+1))
		_ = resp.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if len(body) <= maxCachedBody {
			t.mu.Lock()
			if len(t.entries) >= maxCachedResponses {
				t.entries = map[string]cachedResponse{}
			}
			t.entries[key] = cachedResponse{etag: resp.Header.Get("ETag"), header: resp.Header.Clone(), body: body}
			t.mu.Unlock()
		}
	}
	return resp, nil
}

// rateReset parses X-RateLimit-Reset (Unix seconds).
func rateReset(h http.Header) (time.Time, bool) {
	v, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64)
	if err != nil || v <= 0 {
		return time.Time{}, false
	}
	return time.Unix(v, 0), true
}
