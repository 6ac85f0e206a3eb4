package webhook

import (
	"context"
	"errors"
	"net"
	"net/http"
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

// Serve serves the receiver on l and runs its workers until ctx is done, then shuts down
// gracefully. Timeouts are tight because GitHub abandons a delivery after 10 s anyway.
func (r *Receiver) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{
		Handler:           r,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       time.Minute,
		MaxHeaderBytes:    64 << 10,
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
	ctrl.LoggerFrom(ctx).Info("Serving GitHub webhooks", "address", l.Addr().String(), "path", Path)

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
