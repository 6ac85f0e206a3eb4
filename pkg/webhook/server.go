package webhook

import (
	"context"
	"errors"
	"maps"
	"net"
	"net/http"
	"slices"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// ListenAndServe serves the receiver on addr and runs its workers until ctx is done.
func (r *Receiver) ListenAndServe(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	return r.Serve(ctx, l)
}

// ServerTimeouts bound how long a connection may take over each part of a request. Senders are
// untrusted: a connection that dribbles its headers or body (slow loris) is cut, so it holds
// neither memory nor a slot for long. GitHub abandons a delivery after 10 s anyway.
type ServerTimeouts struct {
	// ReadHeader bounds reading the request headers; default 5s.
	ReadHeader time.Duration
	// Read bounds reading the whole request, body included; default 10s.
	Read time.Duration
	// BodyGrace is how long a body may take before it must keep up MinBodyRate; default 1s.
	BodyGrace time.Duration
	// MinBodyRate is the bytes per second a body must average after BodyGrace, or its read is
	// cut (408); default 32 KiB/s, so even a body of the largest size fits in Read.
	MinBodyRate int64
	// Write bounds writing the answer; default 10s.
	Write time.Duration
	// Idle bounds a kept-alive connection between requests; default 30s.
	Idle time.Duration
}

func (t ServerTimeouts) withDefaults() ServerTimeouts {
	or := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	rate := t.MinBodyRate
	if rate <= 0 {
		rate = DefaultMinBodyRate
	}
	return ServerTimeouts{
		ReadHeader: or(t.ReadHeader, 5*time.Second), Read: or(t.Read, 10*time.Second),
		BodyGrace: or(t.BodyGrace, time.Second), MinBodyRate: rate,
		Write: or(t.Write, 10*time.Second), Idle: or(t.Idle, 30*time.Second),
	}
}

// DefaultMinBodyRate is ServerTimeouts.MinBodyRate's default, in bytes per second.
const DefaultMinBodyRate = 32 << 10

// maxHeaderBytes bounds a request's headers; GitHub's are well under 4 KiB.
const maxHeaderBytes = 32 << 10

// Serve serves the receiver on l and runs its workers until ctx is done, then shuts down
// gracefully.
func (r *Receiver) Serve(ctx context.Context, l net.Listener) error {
	t := r.cfg.Timeouts
	srv := &http.Server{
		Handler:           r,
		ReadHeaderTimeout: t.ReadHeader,
		ReadTimeout:       t.Read,
		WriteTimeout:      t.Write,
		IdleTimeout:       t.Idle,
		MaxHeaderBytes:    maxHeaderBytes,
		// Requests carry ctx's logger but are not cancelled with it, so shutdown drains them.
		BaseContext: func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	workerCtx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	workersDone := make(chan struct{})
	go func() {
		defer close(workersDone)
		_ = r.Start(workerCtx)
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(l) }()
	var paths []string
	for _, k := range slices.Sorted(maps.Keys(r.cfg.Secrets)) {
		paths = append(paths, PathPrefix+string(k))
	}
	ctrl.LoggerFrom(ctx).Info("Serving CI platform webhooks", "address", l.Addr().String(), "paths", paths)

	var err error
	select {
	case err = <-serveErr:
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		err = srv.Shutdown(shutdownCtx)
	}
	stopWorkers()
	<-workersDone
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
