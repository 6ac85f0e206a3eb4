package config

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Manager is the manager's configuration.
type Manager struct {
	LogLevel               string
	MetricsBindAddress     string
	MetricsSecure          bool
	HealthProbeBindAddress string
	// PprofBindAddress serves net/http/pprof's profiles (diagnosis only, unauthenticated: bind it
	// to loopback); "0" or empty disables it.
	PprofBindAddress        string
	LeaderElect             bool
	LeaderElectionNamespace string
	LeaderElectionID        string
	// WatchNamespace restricts the manager to one namespace; empty watches all.
	WatchNamespace string
	// WatchFilter is Cluster API's watch-filter label value: only objects labelled
	// cluster.x-k8s.io/watch-filter=<value> are reconciled.
	WatchFilter string
	// Concurrency is the number of parallel reconciles per controller.
	Concurrency int
	SyncPeriod  time.Duration
	// SweepInterval is the default interval between power-state sweeps of a HypervisorCluster.
	SweepInterval time.Duration
	// OrphanGracePeriod is how long an owned VM without a claim is kept before it is removed.
	OrphanGracePeriod time.Duration
	// ProviderTimeout bounds each hypervisor API call.
	ProviderTimeout time.Duration
	// WebhookBindAddress serves the CI platform webhook receiver.
	WebhookBindAddress string
	// WebhookSecrets holds the secret of each CI platform's route /webhooks/<kind>, by kind; each
	// is the setting its platform's driver declares (platform.Driver.WebhookSecret: GitHub's
	// --webhook-secret / GITHUB_WEBHOOK_SECRET, GitLab's --gitlab-webhook-secret, ...). A route
	// without one refuses every delivery.
	WebhookSecrets map[platform.Kind]string
	// BootstrapServiceURL is the address VMs reach the bootstrap service at.
	BootstrapServiceURL string
	// BootstrapCASecret is namespace/name of the Secret with the builtin identity CA, shared with
	// the bootstrap service.
	BootstrapCASecret string
	// TrustDomain is the SPIFFE trust domain of runner VMs when a BootstrapConfig names none.
	TrustDomain string
	// WorkloadReaderServiceAccount is namespace/name of the ServiceAccount whose token a
	// FleetControlPlane puts in its Cluster's kubeconfig Secret.
	WorkloadReaderServiceAccount string
	// SPIREAdminAddress, when set, is where the manager reaches the SPIRE server's admin API for
	// every BootstrapConfig with provider SPIRE (unix:///path or host:port).
	SPIREAdminAddress string
	// SPIREBootstrapServiceURL is where VMs attested by SPIRE reach the bootstrap service's SPIRE
	// endpoint (its --spire-listen), which presents an SVID from SPIRE.
	SPIREBootstrapServiceURL string
	// SPIREAgentServerAddress is the host:port VMs' spire-agent dials when a BootstrapConfig's
	// spireServerAddress is the server's local admin socket.
	SPIREAgentServerAddress string
	// SPIREWorkloadAPIAddress is the Workload API that gives the manager its admin SVID for mTLS to a
	// SPIRE server over TCP.
	SPIREWorkloadAPIAddress string
	// RepairInterval is how often each RunnerPool's demand is reconciled against its CI platform's API.
	RepairInterval time.Duration
	// HistoryURL names the store job records and the manager's audit entries go to
	// (sqlite:///path or postgres://...); empty keeps no job history. HistoryURLFile names a file
	// holding the URL instead (a mounted Secret, for a URL with a password).
	HistoryURL     string
	HistoryURLFile string
	// HistoryRetention is how long job records and audit entries are kept; zero keeps them.
	HistoryRetention time.Duration
	// OTLPEndpoint enables OpenTelemetry tracing when set.
	OTLPEndpoint    string
	OTelServiceName string
}

// DefaultRepairInterval is the default of --repair-interval. The RunnerPool controller falls back
// to it too, for a Manager built without Bind, so it is declared once here.
const DefaultRepairInterval = time.Minute

// setting describes one configuration value.
type setting struct {
	flag, env, usage string
}

// Bind registers the flags on fs with defaults taken from the environment (getenv is os.Getenv in
// production). Values that fail to parse are reported by the returned function after fs.Parse.
func (m *Manager) Bind(fs *flag.FlagSet, getenv func(string) string) func() error {
	var errs []error
	str := func(p *string, s setting, def string) {
		if v := getenv(s.env); v != "" {
			def = v
		}
		fs.StringVar(p, s.flag, def, fmt.Sprintf("%s (env %s)", s.usage, s.env))
	}
	boolean := func(p *bool, s setting, def bool) {
		if v := getenv(s.env); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: not a boolean", s.env, v))
			} else {
				def = b
			}
		}
		fs.BoolVar(p, s.flag, def, fmt.Sprintf("%s (env %s)", s.usage, s.env))
	}
	integer := func(p *int, s setting, def int) {
		if v := getenv(s.env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: not an integer", s.env, v))
			} else {
				def = n
			}
		}
		fs.IntVar(p, s.flag, def, fmt.Sprintf("%s (env %s)", s.usage, s.env))
	}
	duration := func(p *time.Duration, s setting, def time.Duration) {
		if v := getenv(s.env); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: not a duration such as 30s", s.env, v))
			} else {
				def = d
			}
		}
		fs.DurationVar(p, s.flag, def, fmt.Sprintf("%s (env %s)", s.usage, s.env))
	}

	str(&m.LogLevel, setting{"log-level", "LOG_LEVEL", "DEBUG, INFO, WARN or ERROR"}, "INFO")
	str(&m.MetricsBindAddress, setting{"metrics-bind-address", "METRICS_BIND_ADDRESS", "address of the metrics endpoint; 0 disables it"}, ":8080")
	boolean(&m.MetricsSecure, setting{"metrics-secure", "METRICS_SECURE", "serve metrics over HTTPS with Kubernetes authentication and authorization"}, true)
	str(&m.HealthProbeBindAddress, setting{"health-probe-bind-address", "HEALTH_PROBE_BIND_ADDRESS", "address of /healthz and /readyz"}, ":8081")
	str(&m.PprofBindAddress, setting{"pprof-bind-address", "PPROF_BIND_ADDRESS", "address of Go's /debug/pprof profiles, unauthenticated (bind to 127.0.0.1); 0 disables them"}, "0")
	boolean(&m.LeaderElect, setting{"leader-elect", "LEADER_ELECT", "elect a leader so only one replica reconciles"}, false)
	str(&m.LeaderElectionNamespace, setting{"leader-election-namespace", "LEADER_ELECTION_NAMESPACE", "namespace of the leader election lease; default the pod's"}, "")
	str(&m.LeaderElectionID, setting{"leader-election-id", "LEADER_ELECTION_ID", "name of the leader election lease"}, "hyperfleet-manager.hyperfleet.io")
	str(&m.WatchNamespace, setting{"namespace", "WATCH_NAMESPACE", "only watch this namespace; empty watches all"}, "")
	str(&m.WatchFilter, setting{"watch-filter", "WATCH_FILTER", "only reconcile objects labelled cluster.x-k8s.io/watch-filter=<value>"}, "")
	integer(&m.Concurrency, setting{"concurrency", "CONCURRENCY", "parallel reconciles per controller"}, 10)
	duration(&m.SyncPeriod, setting{"sync-period", "SYNC_PERIOD", "how often every object is reconciled even without changes"}, 10*time.Minute)
	duration(&m.SweepInterval, setting{"sweep-interval", "SWEEP_INTERVAL", "default interval of the power-state sweep of each HypervisorCluster"}, 30*time.Second)
	duration(&m.OrphanGracePeriod, setting{"orphan-grace-period", "ORPHAN_GRACE_PERIOD", "age after which an owned VM without a MachineClaim is deleted"}, 5*time.Minute)
	duration(&m.ProviderTimeout, setting{"provider-timeout", "PROVIDER_TIMEOUT", "timeout of each hypervisor API call"}, 30*time.Second)
	str(&m.WebhookBindAddress, setting{"webhook-bind-address", "WEBHOOK_BIND_ADDRESS", "address of the CI webhook receiver; 0 disables it"}, ":9090")
	// Each registered CI platform declares the setting of its webhook secret.
	if m.WebhookSecrets == nil {
		m.WebhookSecrets = map[platform.Kind]string{}
	}
	for _, d := range platform.Drivers() {
		s := d.WebhookSecret
		if v := getenv(s.Env); v != "" {
			m.WebhookSecrets[d.Kind] = v
		}
		fs.Var(secretValue{m.WebhookSecrets, d.Kind}, s.Flag, fmt.Sprintf("%s (env %s)", s.Usage, s.Env))
	}
	str(&m.BootstrapServiceURL, setting{"bootstrap-service-url", "BOOTSTRAP_SERVICE_URL", "URL VMs reach the bootstrap service at"}, "")
	str(&m.BootstrapCASecret, setting{"bootstrap-ca-secret", "BOOTSTRAP_CA_SECRET", "namespace/name of the Secret holding the builtin identity CA (shared with the bootstrap service)"}, "hyperfleet-system/hyperfleet-bootstrap-ca")
	str(&m.TrustDomain, setting{"trust-domain", "TRUST_DOMAIN", "SPIFFE trust domain of runner VMs"}, "hyperfleet.local")
	str(&m.WorkloadReaderServiceAccount, setting{"workload-reader-service-account", "WORKLOAD_READER_SERVICE_ACCOUNT", "namespace/name of the node-reading ServiceAccount FleetControlPlane kubeconfigs use"}, "hyperfleet-system/hyperfleet-workload-reader")
	str(&m.SPIREAdminAddress, setting{"spire-admin-address", "SPIRE_ADMIN_ADDRESS", "SPIRE server admin API for provider SPIRE (unix:///path or host:port), the only SPIRE server the manager dials; empty disables provider SPIRE"}, "")
	str(&m.SPIREAgentServerAddress, setting{"spire-agent-server-address", "SPIRE_AGENT_SERVER_ADDRESS", "host:port of the SPIRE server as VMs' spire-agent reach it"}, "")
	str(&m.SPIREBootstrapServiceURL, setting{"spire-bootstrap-service-url", "SPIRE_BOOTSTRAP_SERVICE_URL", "URL VMs attested by SPIRE reach the bootstrap service's SPIRE endpoint (its --spire-listen) at"}, "")
	str(&m.SPIREWorkloadAPIAddress, setting{"spire-workload-api-address", "SPIRE_WORKLOAD_API_ADDRESS", "Workload API giving the manager its SVID for a SPIRE server over TCP; empty uses SPIFFE_ENDPOINT_SOCKET"}, "")
	duration(&m.RepairInterval, setting{"repair-interval", "REPAIR_INTERVAL", "how often RunnerPool demand is reconciled against the pool's CI platform API (repairs missed webhooks)"}, DefaultRepairInterval)
	str(&m.HistoryURL, setting{"history-url", "HISTORY_URL", "store of job records and the manager's audit entries (sqlite:///path or postgres://...); empty keeps no job history"}, "")
	str(&m.HistoryURLFile, setting{"history-url-file", "HISTORY_URL_FILE", "file holding the history store's URL (a mounted Secret), instead of history-url"}, "")
	duration(&m.HistoryRetention, setting{"history-retention", "HISTORY_RETENTION", "how long job records and audit entries are kept; 0 keeps them"}, 90*24*time.Hour)
	str(&m.OTLPEndpoint, setting{"otlp-endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT", "OpenTelemetry OTLP endpoint; empty disables tracing"}, "")
	str(&m.OTelServiceName, setting{"otel-service-name", "OTEL_SERVICE_NAME", "service name of the traces"}, "hyperfleet-operator")

	return func() error {
		if len(errs) > 0 {
			return errs[0]
		}
		return m.Validate()
	}
}

// secretValue is a flag that sets one platform's webhook secret; its value is never printed.
type secretValue struct {
	secrets map[platform.Kind]string
	kind    platform.Kind
}

func (v secretValue) String() string { return "" }

func (v secretValue) Set(s string) error {
	v.secrets[v.kind] = s
	return nil
}

// Validate checks values flags cannot type-check.
func (m *Manager) Validate() error {
	if m.Concurrency < 1 {
		return fmt.Errorf("concurrency must be at least 1, got %d", m.Concurrency)
	}
	if m.SweepInterval < time.Second {
		return fmt.Errorf("sweep-interval must be at least 1s, got %s", m.SweepInterval)
	}
	if ns, name, ok := strings.Cut(m.BootstrapCASecret, "/"); !ok || ns == "" || name == "" {
		return fmt.Errorf("bootstrap-ca-secret must be namespace/name, got %q", m.BootstrapCASecret)
	}
	if m.HistoryURL != "" && m.HistoryURLFile != "" {
		return fmt.Errorf("history-url and history-url-file are both set; set one")
	}
	if m.HistoryRetention < 0 {
		return fmt.Errorf("history-retention must not be negative, got %s", m.HistoryRetention)
	}
	if m.ProviderTimeout <= 0 {
		return fmt.Errorf("provider-timeout must be positive, got %s", m.ProviderTimeout)
	}
	return nil
}

// FromArgs parses args with the process environment as defaults.
func FromArgs(args []string) (*Manager, error) {
	m := &Manager{}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	check := m.Bind(fs, os.Getenv)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	return m, check()
}
