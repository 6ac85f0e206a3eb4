package manager

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	certutil "k8s.io/client-go/util/cert"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"

	"github.com/hyperfleet-io/hyperfleet/pkg/config"
)

// Limits of the manager's metrics and health-probe listeners. controller-runtime's own servers
// offer no way to set them (32s to send headers, no read or write timeout, 1 MiB of headers), so
// the manager runs its own, serving the same endpoints.
//   - Requests are a GET with a few short headers (a kubelet probe, a Prometheus scrape with a
//     bearer token): 5s for the headers, 10s for the whole request and 16 KiB of headers are ample.
//   - Writing a response may take up to 30s: a scrape of a large registry must fit. Prometheus gives
//     up after its scrape timeout (10s by default, the chart's), so nothing legitimate waits longer.
//   - A connection may stay idle for 60s, longer than the 30s scrape interval, so a scraper keeps
//     its connection (and its TLS session) between scrapes.
const (
	listenerReadHeaderTimeout = 5 * time.Second
	listenerReadTimeout       = 10 * time.Second
	listenerWriteTimeout      = 30 * time.Second
	listenerIdleTimeout       = time.Minute
	listenerMaxHeaderBytes    = 16 << 10
	// metricsShutdownTimeout is controller-runtime's for its metrics server.
	metricsShutdownTimeout = time.Minute
)

// newHTTPServer is an http.Server with the listeners' limits.
func newHTTPServer(handler http.Handler) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: listenerReadHeaderTimeout,
		ReadTimeout:       listenerReadTimeout,
		WriteTimeout:      listenerWriteTimeout,
		IdleTimeout:       listenerIdleTimeout,
		MaxHeaderBytes:    listenerMaxHeaderBytes,
	}
}

// disabled reports whether a bind address turns its listener off, as controller-runtime reads it.
func disabled(addr string) bool { return addr == "" || addr == "0" }

// addHealthProbeServer serves /healthz (ping) and /readyz (informers synced) on
// cfg.HealthProbeBindAddress, as controller-runtime's health probe server would. It listens at once,
// so a port in use fails New, and serves before the caches start, so a liveness probe answers while
// they sync.
func addHealthProbeServer(mgr manager.Manager, cfg *config.Manager) error {
	if disabled(cfg.HealthProbeBindAddress) {
		return nil
	}
	mux := http.NewServeMux()
	for path, h := range map[string]http.Handler{
		"/healthz": &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}},
		"/readyz":  &healthz.Handler{Checks: map[string]healthz.Checker{"informers": cacheSynced(mgr)}},
	} {
		mux.Handle(path, http.StripPrefix(path, h))
		mux.Handle(path+"/", http.StripPrefix(path, h)) // one check: /readyz/informers
	}
	ln, err := net.Listen("tcp", cfg.HealthProbeBindAddress)
	if err != nil {
		return fmt.Errorf("health probe listener on %s: %w", cfg.HealthProbeBindAddress, err)
	}
	if err := mgr.Add(&manager.Server{Name: "health probe", Server: newHTTPServer(mux), Listener: ln}); err != nil {
		_ = ln.Close()
		return err
	}
	return nil
}

// addMetricsServer serves controller-runtime's metrics registry on /metrics at
// cfg.MetricsBindAddress. With MetricsSecure it is HTTPS and only callers whose token (TokenReview)
// may get the non-resource URL /metrics (SubjectAccessReview) are served, exactly as
// controller-runtime's SecureServing with filters.WithAuthenticationAndAuthorization: the
// certificate is tls.crt and tls.key of controller-runtime's default certificate directory when both
// exist (reloaded when they change), else a self-signed one for localhost and 127.0.0.1.
func addMetricsServer(mgr manager.Manager, cfg *config.Manager) error {
	if disabled(cfg.MetricsBindAddress) {
		return nil
	}
	var handler http.Handler = promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError})
	var tlsConfig *tls.Config
	if cfg.MetricsSecure {
		filter, err := filters.WithAuthenticationAndAuthorization(mgr.GetConfig(), mgr.GetHTTPClient())
		if err != nil {
			return fmt.Errorf("metrics authentication and authorization: %w", err)
		}
		if handler, err = filter(ctrl.Log.WithName("metrics").WithValues("path", "/metrics"), handler); err != nil {
			return fmt.Errorf("metrics authentication and authorization: %w", err)
		}
		if tlsConfig, err = metricsTLSConfig(mgr); err != nil {
			return err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", handler)
	ln, err := net.Listen("tcp", cfg.MetricsBindAddress)
	if err != nil {
		return fmt.Errorf("metrics listener on %s: %w", cfg.MetricsBindAddress, err)
	}
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	timeout := metricsShutdownTimeout
	if err := mgr.Add(&manager.Server{Name: "metrics", Server: newHTTPServer(mux), Listener: ln, ShutdownTimeout: &timeout}); err != nil {
		_ = ln.Close()
		return err
	}
	return nil
}

// metricsTLSConfig is controller-runtime's metrics TLS: HTTP/2 offered (HTTP/1.1 clients still
// served), the mounted certificate when there is one, else a self-signed one.
func metricsTLSConfig(mgr manager.Manager) (*tls.Config, error) {
	cfg := &tls.Config{NextProtos: []string{"h2"}}
	dir := filepath.Join(os.TempDir(), "k8s-metrics-server", "serving-certs")
	certPath, keyPath := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	_, certErr := os.Stat(certPath)
	_, keyErr := os.Stat(keyPath)
	if !os.IsNotExist(certErr) && !os.IsNotExist(keyErr) {
		watcher, err := certwatcher.New(certPath, keyPath)
		if err != nil {
			return nil, fmt.Errorf("metrics serving certificate: %w", err)
		}
		if err := mgr.Add(watcher); err != nil {
			return nil, err
		}
		cfg.GetCertificate = watcher.GetCertificate
		return cfg, nil
	}
	cert, key, err := certutil.GenerateSelfSignedCertKeyWithFixtures("localhost", []net.IP{{127, 0, 0, 1}}, nil, "")
	if err != nil {
		return nil, fmt.Errorf("self-signed metrics certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("self-signed metrics certificate: %w", err)
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}
