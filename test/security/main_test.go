package security

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/api"
	"github.com/hyperfleet-io/hyperfleet/controllers"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/logging"
	"github.com/hyperfleet-io/hyperfleet/pkg/manager"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

var (
	env  *testenv.Env
	inst *testenv.Installation
)

func TestMain(m *testing.M) {
	testenv.ExitIfShort("an API server and the local fleet")
	level := os.Getenv("LOG_LEVEL")
	if level == "" {
		level = "ERROR"
	}
	log, _ := logging.New(level, os.Stderr)
	ctrl.SetLogger(log)
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if inst, err = env.Install(context.Background(), time.Hour); err != nil {
		fmt.Fprintln(os.Stderr, "installing HyperFleet's RBAC:", err)
		_ = env.Stop()
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}

// startManager runs HyperFleet's manager with the installation's ServiceAccount token, until the
// test ends.
func startManager(t *testing.T) {
	t.Helper()
	cfg := &config.Manager{
		MetricsBindAddress: "0", HealthProbeBindAddress: "0", WebhookBindAddress: "0", Concurrency: 2,
		SyncPeriod: time.Minute, SweepInterval: time.Second, OrphanGracePeriod: time.Minute,
		ProviderTimeout: 5 * time.Second, LeaderElectionID: "hyperfleet-security-test",
		BootstrapCASecret: inst.CASecret.String(), TrustDomain: "hyperfleet.local",
		BootstrapServiceURL: "https://127.0.0.1:8443", RepairInterval: time.Hour,
		WorkloadReaderServiceAccount: inst.WorkloadReader.String(),
	}
	mgr, err := manager.New(context.Background(), inst.Manager, cfg, func(o *controllers.Options) { o.Testing.SkipNameValidation = true })
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	testenv.RunManager(t, mgr)
}

// userClient is a client of a new user who has the built-in ClusterRole edit in namespace, the way
// a platform team gives a team its namespace. HyperFleet's kinds reach edit by aggregation, which
// kube-controller-manager does and envtest lacks: the aggregated role is bound next to it.
func userClient(t *testing.T, name, namespace string) client.Client {
	t.Helper()
	g := NewWithT(t)
	cfg, err := env.User(name)
	g.Expect(err).NotTo(HaveOccurred())
	for _, role := range []string{"edit", "hyperfleet-aggregate-to-edit"} {
		g.Expect(env.GrantClusterRole(context.Background(), namespace, role, name)).To(Succeed())
	}
	c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// enable creates namespace and lets HyperFleet serve it, as docs/install.md tells an admin to.
func enable(ctx context.Context, namespace string) error { return env.EnableNamespace(ctx, namespace) }

// createNamespace creates a namespace that is not enabled for HyperFleet.
func createNamespace(ctx context.Context, namespace string) error {
	return client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))
}
