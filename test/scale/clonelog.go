package scale

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// cloneLog records when the simulator accepted each clone request (its "clone" log record, with
// the new VMID), for the webhook → clone latency.
type cloneLog struct {
	mu    sync.Mutex
	times map[int]time.Time // first clone request per VMID
	all   []time.Time
}

func newCloneLog() *cloneLog { return &cloneLog{times: map[int]time.Time{}} }

func (c *cloneLog) snapshot() (first map[int]time.Time, all []time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first = make(map[int]time.Time, len(c.times))
	for k, v := range c.times {
		first[k] = v
	}
	return first, append([]time.Time(nil), c.all...)
}

// handler wraps next: every record still goes to next (by next's level); clone records are noted.
func (c *cloneLog) handler(next slog.Handler) slog.Handler { return &cloneHandler{log: c, next: next} }

type cloneHandler struct {
	log  *cloneLog
	next slog.Handler
}

func (h *cloneHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *cloneHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "clone" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "newid" {
				id := int(a.Value.Int64())
				h.log.mu.Lock()
				if _, seen := h.log.times[id]; !seen {
					h.log.times[id] = r.Time
				}
				h.log.all = append(h.log.all, r.Time)
				h.log.mu.Unlock()
				return false
			}
			return true
		})
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *cloneHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &cloneHandler{log: h.log, next: h.next.WithAttrs(attrs)}
}

func (h *cloneHandler) WithGroup(name string) slog.Handler {
	return &cloneHandler{log: h.log, next: h.next.WithGroup(name)}
}
