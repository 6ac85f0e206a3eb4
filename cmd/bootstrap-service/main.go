// Command bootstrap-service is the only endpoint runner VMs talk to: it redeems single-use join
// tokens for X509-SVIDs and hands each attested VM its one-time runner config over mTLS. It runs as
// its own Deployment with any number of replicas; all state is in the API server.
//
//	bootstrap-service --listen :8443 --ca-secret hyperfleet-system/hyperfleet-bootstrap-ca \
//	    --trust-domain hyperfleet.local --dns-name hyperfleet-bootstrap-service.hyperfleet-system.svc
package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/hyperfleet-io/hyperfleet/api"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/service"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/builtin"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/tpm"
	"github.com/hyperfleet-io/hyperfleet/pkg/logging"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	_ "github.com/hyperfleet-io/hyperfleet/pkg/platform/all" // registers every CI platform
	pinstrumented "github.com/hyperfleet-io/hyperfleet/pkg/platform/instrumented"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bootstrap-service:", err)
		os.Exit(1)
	}
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bootstrap-service", flag.ContinueOnError)
	listen := fs.String("listen", ":8443", "TLS listen address for VMs")
	health := fs.String("health-probe-bind-address", envOr("HEALTH_PROBE_BIND_ADDRESS", ":8081"), "plain HTTP /healthz and /readyz; 0 disables")
	caSecret := fs.String("ca-secret", "hyperfleet-system/hyperfleet-bootstrap-ca", "namespace/name of the Secret holding the CA key pair (created if missing)")
	trustDomain := fs.String("trust-domain", identity.DefaultTrustDomain, "SPIFFE trust domain of issued SVIDs")
	svidTTL := fs.Duration("svid-ttl", builtin.DefaultSVIDTTL, "lifetime of machine SVIDs")
	logLevel := fs.String("log-level", envOr("LOG_LEVEL", "INFO"), "DEBUG, INFO, WARN or ERROR")
	spireListen := fs.String("spire-listen", envOr("SPIRE_LISTEN", ""), "TLS listen address for VMs attested by SPIRE (BootstrapConfig provider SPIRE); empty serves none")
	spireWorkloadAPI := fs.String("spire-workload-api-address", "", "SPIRE Workload API giving the service its SVID for --spire-listen; empty uses SPIFFE_ENDPOINT_SOCKET")
	ekCABundle := fs.String("tpm-ek-ca-bundle", "", "PEM file of the TPM manufacturers' CA certificates; TPMs presenting an EK certificate must chain to them")
	requireEKCert := fs.Bool("tpm-require-ek-certificate", false, "refuse TPM attestation without an EK certificate that chains to --tpm-ek-ca-bundle")
	attestRate := fs.Float64("attest-rate", service.DefaultPerClientRate, "attestation requests per second per client address (token bucket)")
	attestBurst := fs.Int("attest-burst", service.DefaultPerClientBurst, "attestation requests a client address may make at once")
	attestInFlight := fs.Int("attest-max-in-flight", service.DefaultMaxInFlight, "attestation requests served at once, all clients together")
	var dnsNames, ips listFlag
	fs.Var(&dnsNames, "dns-name", "DNS name for the service certificate (repeatable)")
	fs.Var(&ips, "ip", "IP address for the service certificate (repeatable); default the comma-separated BOOTSTRAP_SERVICE_IPS")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(ips) == 0 {
		// The release's ConfigMap (clusterctl variable HYPERFLEET_BOOTSTRAP_SERVICE_IPS): the
		// addresses VMs dial when they reach the service without DNS, e.g. a NodePort's.
		for _, s := range strings.Split(os.Getenv("BOOTSTRAP_SERVICE_IPS"), ",") {
			if s = strings.TrimSpace(s); s != "" {
				ips = append(ips, s)
			}
		}
	}
	log, err := logging.New(*logLevel, os.Stderr)
	if err != nil {
		return err
	}
	ctrl.SetLogger(log)
	log.Info("starting HyperFleet bootstrap service", "version", version, "revision", revision)
	td, err := spiffeid.TrustDomainFromString(*trustDomain)
	if err != nil {
		return err
	}
	ns, name, ok := strings.Cut(*caSecret, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("--ca-secret %q is not namespace/name", *caSecret)
	}
	var ipList []net.IP
	for _, s := range ips {
		ip := net.ParseIP(s)
		if ip == nil {
			return fmt.Errorf("--ip %q is not an IP address", s)
		}
		ipList = append(ipList, ip)
	}
	ekRoots, err := loadEKRoots(*ekCABundle, *requireEKCert)
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	if err != nil {
		return err
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ca, err := builtin.LoadOrCreateCA(startCtx, c, types.NamespacedName{Namespace: ns, Name: name}, td)
	if err != nil {
		return err
	}
	// The one CI platform seam of the service, instrumented here once and shared by both servers.
	src, err := platform.NewSource(platform.Inputs{Reader: c})
	if err != nil {
		return err
	}
	platforms := pinstrumented.Source(src)
	srv, err := service.New(service.Options{
		Client: c, CA: ca, Platforms: platforms, Attestor: &builtin.Attestor{Client: c, CA: ca, SVIDTTL: *svidTTL},
		TPM: &tpm.Attestor{Client: c, CA: ca, SVIDTTL: *svidTTL,
			EKRoots: ekRoots, RequireEKCertificate: *requireEKCert},
		DNSNames: dnsNames, IPs: ipList, Logger: log.WithName("bootstrap-service"),
		Limits: service.Limits{PerClientRate: *attestRate, PerClientBurst: *attestBurst, MaxInFlight: *attestInFlight},
	})
	if err != nil {
		return err
	}
	var spireSrv *service.Server
	if *spireListen != "" {
		if spireSrv, err = newSPIREServer(startCtx, c, platforms, *spireWorkloadAPI, log); err != nil {
			return err
		}
	}
	if *health != "0" {
		go serveHealth(ctx, *health)
	}
	ctx, cancelAll := context.WithCancel(ctx)
	defer cancelAll()
	errc := make(chan error, 2)
	serve := func(s *service.Server, addr string, kv ...any) error {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		log.Info("serving", append([]any{"address", l.Addr().String(), "trustDomain", s.TrustDomain().Name()}, kv...)...)
		go func() { errc <- s.Serve(ctx, l) }()
		return nil
	}
	if err := serve(srv, *listen, "identity", "builtin", "caSecret", *caSecret); err != nil {
		return err
	}
	servers := 1
	if spireSrv != nil {
		if err := serve(spireSrv, *spireListen, "identity", "SPIRE"); err != nil {
			return err
		}
		servers++
	}
	// Either listener failing ends the process; the other is shut down with it.
	err = <-errc
	cancelAll()
	for range servers - 1 {
		err = errors.Join(err, <-errc)
	}
	return err
}

// newSPIREServer serves VMs attested by SPIRE with the SVID the SPIRE Workload API gives this
// service, which must be spiffe://<trust domain>/hyperfleet/bootstrap-service.
func newSPIREServer(ctx context.Context, c client.Client, platforms platform.Source, workloadAPI string, log logr.Logger) (*service.Server, error) {
	var opts []workloadapi.X509SourceOption
	if workloadAPI != "" {
		opts = append(opts, workloadapi.WithClientOptions(workloadapi.WithAddr(workloadAPI)))
	}
	source, err := workloadapi.NewX509Source(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("--spire-listen needs an SVID from the SPIRE Workload API (%s): %w", orEnv(workloadAPI), err)
	}
	srv, err := service.New(service.Options{Client: c, SPIRE: source, Platforms: platforms, Logger: log.WithName("bootstrap-service-spire")})
	if err != nil {
		_ = source.Close()
		return nil, err
	}
	return srv, nil
}

// loadEKRoots reads the EK CA bundle; requiring EK certificates without one is a mistake.
func loadEKRoots(path string, required bool) (*x509.CertPool, error) {
	if path == "" {
		if required {
			return nil, errors.New("--tpm-require-ek-certificate needs --tpm-ek-ca-bundle")
		}
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("--tpm-ek-ca-bundle %s holds no PEM certificate", path)
	}
	return pool, nil
}

func orEnv(addr string) string {
	if addr != "" {
		return addr
	}
	return "SPIFFE_ENDPOINT_SOCKET=" + os.Getenv("SPIFFE_ENDPOINT_SOCKET")
}

func serveHealth(ctx context.Context, addr string) {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }
	mux.HandleFunc("/healthz", ok)
	mux.HandleFunc("/readyz", ok)
	// Attestation counts and Go runtime metrics, on the plain health port (no VM reaches it).
	mux.Handle("/metrics", promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 16 << 10}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		ctrl.Log.Error(err, "health endpoint stopped")
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
