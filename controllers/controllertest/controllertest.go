// Package controllertest is what the controllers' test suites share: one envtest API server per
// test binary, HyperFleet's manager started as the binary starts it (with the tests' fast timings),
// a namespace per test cleared when it ends, and a Proxmox simulator's HypervisorCluster. It is
// imported by tests only.
package controllertest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/proxmox"
	"github.com/hyperfleet-io/hyperfleet/pkg/logging"
	"github.com/hyperfleet-io/hyperfleet/pkg/manager"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

var (
	// Env is the test binary's API server, set by Start.
	Env       *testenv.Env
	capiOnce  sync.Once
	capiMgr   *testenv.CAPIManager
	capiError error
)

// StartCAPI runs the real Cluster API core manager for the rest of the package's tests.
func StartCAPI(t *testing.T) {
	t.Helper()
	capiOnce.Do(func() { capiMgr, capiError = Env.StartCAPIManager(context.Background()) })
	if capiError != nil {
		t.Fatalf("Cluster API manager: %v", capiError)
	}
}

// Start starts the test binary's API server (Env) with the manager's log at LOG_LEVEL (ERROR
// unless set). A TestMain calls it once, after testenv.ExitIfShort, and Stop after m.Run.
func Start() (*testenv.Env, error) {
	log, _ := logging.New(os.Getenv("LOG_LEVEL"), os.Stderr)
	if os.Getenv("LOG_LEVEL") == "" {
		log, _ = logging.New("ERROR", os.Stderr)
	}
	ctrl.SetLogger(log)
	var err error
	Env, err = testenv.Start()
	return Env, err
}

// Stop stops the Cluster API manager, if one was started, and the API server.
func Stop() {
	if capiMgr != nil {
		capiMgr.Stop()
	}
	if Env == nil {
		return
	}
	if err := Env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
}

// Main is a whole TestMain for a package whose every test needs the API server: it ends at once
// in -short mode, saying so, starts Env, hands it to each of started (a package keeping its own
// name for it), runs the tests and stops everything.
func Main(m *testing.M, needs string, started ...func(*testenv.Env)) {
	testenv.ExitIfShort(needs)
	if _, err := Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, f := range started {
		f(Env)
	}
	code := m.Run()
	Stop()
	os.Exit(code)
}

// Timing makes the controllers fast enough for tests: sweeps every second, tasks polled often.
type Timing struct {
	Sweep       time.Duration
	OrphanGrace time.Duration
	// RunnerName, if set, names the RunnerPools' new runners instead of the random generator.
	RunnerName func(pool string) string
	// TaskDeadline, when set, bounds a deleting claim's wait for one task.
	TaskDeadline time.Duration
	// Clock, when set, tells snapshot schedules the time.
	Clock clock.PassiveClock
	// Providers are extra provider builders (the in-memory GUID provider).
	Providers map[infrav1.ProviderType]connection.ProviderBuilder
	// TaskPoll and ProviderTaskPoll, when set, replace the tests' fast task polls (100 ms in the
	// controllers, 20 ms inside the provider): a run against the load model scales them with it.
	TaskPoll, ProviderTaskPoll time.Duration
	// HistoryURL, when set, is the manager's history store (HISTORY_URL): its recorder writes
	// job records and the audit log there.
	HistoryURL string
	// CapacityRecheck, when set, is how long a claim waiting for capacity waits for a wake-up.
	CapacityRecheck time.Duration
}

// StartManager runs HyperFleet's manager, as the binary would, until the test ends or stop is called.
func StartManager(t *testing.T, timing ...Timing) (stop func()) {
	t.Helper()
	return StartManagerWith(t, nil, timing...)
}

// StartManagerWith is StartManager with a chance to change the manager's configuration.
func StartManagerWith(t *testing.T, mutate func(*config.Manager), timing ...Timing) (stop func()) {
	t.Helper()
	return StartManagerOn(t, Env, mutate, timing...)
}

// StartManagerOn runs HyperFleet's manager against e's API server: a second management cluster
// gets its own installation this way.
func StartManagerOn(t *testing.T, e *testenv.Env, mutate func(*config.Manager), timing ...Timing) (stop func()) {
	t.Helper()
	tm := Timing{Sweep: time.Second, OrphanGrace: 2 * time.Second}
	if len(timing) > 0 {
		tm = timing[0]
	}
	cfg := &config.Manager{
		MetricsBindAddress: "0", HealthProbeBindAddress: "0", Concurrency: 4,
		SyncPeriod: time.Minute, SweepInterval: tm.Sweep, OrphanGracePeriod: tm.OrphanGrace,
		ProviderTimeout: 5 * time.Second, LeaderElectionID: "hyperfleet-test",
		BootstrapCASecret: "default/hyperfleet-bootstrap-ca", TrustDomain: "hyperfleet.local",
		BootstrapServiceURL: "https://127.0.0.1:8443", RepairInterval: time.Hour,
		WorkloadReaderServiceAccount: "default/hyperfleet-workload-reader",
		WebhookBindAddress:           "0",
	}
	cfg.HistoryURL = tm.HistoryURL
	if mutate != nil {
		mutate(cfg)
	}
	mgr, err := manager.New(context.Background(), e.Config, cfg, func(o *controllers.Options) {
		o.Pace.TaskPollInterval = 100 * time.Millisecond
		o.Pace.TaskDeadline = tm.TaskDeadline
		o.Testing.SkipNameValidation = true
		o.Pace.TemplateCheckInterval = time.Second
		o.Testing.RunnerName = tm.RunnerName
		o.Testing.Clock = tm.Clock
		o.Pace.ProviderTaskPollInterval = 20 * time.Millisecond
		o.Testing.Providers = tm.Providers
		o.Pace.CapacityRecheck = tm.CapacityRecheck
		if tm.TaskPoll > 0 {
			o.Pace.TaskPollInterval = tm.TaskPoll
		}
		if tm.ProviderTaskPoll > 0 {
			o.Pace.ProviderTaskPollInterval = tm.ProviderTaskPoll
		}
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	return testenv.RunManager(t, mgr)
}

// NewNamespace makes a namespace named after the test, cleared when the test ends.
func NewNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))[:min(len(t.Name()), 40)] + "-"}}
	NewWithT(t).Expect(Env.Client.Create(context.Background(), ns)).To(Succeed())
	t.Cleanup(func() { ClearNamespace(t, ns.Name) })
	return ns.Name
}

// clearedGroups are the API groups whose objects drive reconciles: HyperFleet's and Cluster API's.
var clearedGroups = map[string]bool{
	"hyperfleet.io": true, "infrastructure.cluster.x-k8s.io": true, "bootstrap.cluster.x-k8s.io": true,
	"cluster.x-k8s.io": true, "controlplane.cluster.x-k8s.io": true,
}

// ClearNamespace deletes every object of clearedGroups' kinds in ns once its test ends, with its
// finalizers removed so that nothing waits on a simulator. The API server has no namespace or
// garbage collector, and every later test's manager (and the shared Cluster API manager) watches
// every namespace: leftovers would be reconciled against simulators long stopped for the rest of
// the package's run, costing CPU and calls in every later test. Pools and Clusters go first, so
// that nothing makes new objects while the rest are deleted.
func ClearNamespace(t *testing.T, ns string) {
	ctx := context.Background()
	var ordered []schema.GroupKind
	for gvk := range Env.Client.Scheme().AllKnownTypes() {
		if gk := gvk.GroupKind(); clearedGroups[gk.Group] && !strings.HasSuffix(gk.Kind, "List") && !slices.Contains(ordered, gk) {
			ordered = append(ordered, gk)
		}
	}
	first := map[string]bool{"RunnerPool": true, "VMPool": true, "MachineDeployment": true, "MachineSet": true,
		"MachinePool": true, "Cluster": true, "MachineHealthCheck": true}
	slices.SortFunc(ordered, func(a, b schema.GroupKind) int {
		if first[a.Kind] != first[b.Kind] {
			if first[a.Kind] {
				return -1
			}
			return 1
		}
		return strings.Compare(a.String(), b.String())
	})
	for _, gk := range ordered {
		m, err := Env.Client.RESTMapper().RESTMapping(gk)
		if err != nil || m.Scope.Name() != meta.RESTScopeNameNamespace {
			continue // not served by this API server, or cluster-scoped
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(m.GroupVersionKind.GroupVersion().WithKind(gk.Kind + "List"))
		if err := Env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Logf("clearing %s: listing %s: %v", ns, gk, err)
			continue
		}
		for i := range list.Items {
			o := &list.Items[i]
			if len(o.GetFinalizers()) > 0 {
				_ = Env.Client.Patch(ctx, o, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
			}
			if err := Env.Client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				t.Logf("clearing %s: deleting %s %s: %v", ns, gk, o.GetName(), err)
			}
		}
	}
}

// ProxmoxCluster creates the credentials, CA bundle and HypervisorCluster for sim.
func ProxmoxCluster(t *testing.T, ns, name string, sim *pvesim.Simulator, mutate ...func(*infrav1.HypervisorCluster)) *infrav1.HypervisorCluster {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(Env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-credentials", Namespace: ns},
		StringData: map[string]string{connection.KeyTokenID: pvesim.TestTokenID, connection.KeyTokenSecret: pvesim.TestTokenSecret},
	})).To(Succeed())
	g.Expect(Env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-ca", Namespace: ns},
		Data:       map[string][]byte{"ca.crt": sim.CACertPEM()},
	})).To(Succeed())
	hc := builder.NewHypervisorCluster(name, ns).
		WithEndpoint(strings.TrimSuffix(sim.URL(), "/api2/json")).
		WithCABundle(name+"-ca", "").
		WithProxmox(infrav1.ProxmoxClusterParameters{VMIDRange: &infrav1.VMIDRange{Start: 1000, End: 1999}}).
		Build()
	for _, m := range mutate {
		m(hc)
	}
	g.Expect(Env.Client.Create(ctx, hc)).To(Succeed())
	return hc
}

// BootstrapSecret writes a bootstrap data Secret as Cluster API's bootstrap providers do.
func BootstrapSecret(t *testing.T, ns, name, userData string) {
	t.Helper()
	NewWithT(t).Expect(Env.Client.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Data:       map[string][]byte{"value": []byte(userData), "format": []byte("cloud-config")},
	})).To(Succeed())
}

// Get reads obj again from the API server.
func Get[T client.Object](g Gomega, obj T) T {
	g.Expect(Env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	return obj
}

// OwnedVMs returns the simulator's VMs carrying HyperFleet's tag.
func OwnedVMs(sim *pvesim.Simulator) []pvesim.VM {
	var out []pvesim.VM
	for _, vm := range sim.VMs() {
		if slices.Contains(vm.Tags, proxmox.TagManaged) || strings.Contains(vm.Description, "hyperfleet") {
			out = append(out, vm)
		}
	}
	return out
}

// ForeignVMs returns the simulator's VMs that are not HyperFleet's, by VMID.
func ForeignVMs(sim *pvesim.Simulator) map[int]pvesim.VM {
	out := map[int]pvesim.VM{}
	for _, vm := range sim.VMs() {
		if !slices.Contains(vm.Tags, proxmox.TagManaged) && !strings.Contains(vm.Description, "hyperfleet") {
			out[vm.VMID] = vm
		}
	}
	return out
}

// KeyOf is o's namespace and name.
func KeyOf(o client.Object) client.ObjectKey { return client.ObjectKeyFromObject(o) }

// CredentialsSecret reads hc's credentials Secret.
func CredentialsSecret(g Gomega, hc *infrav1.HypervisorCluster) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: hc.Namespace, Name: hc.Spec.CredentialsRef.Name}}
	return Get(g, s)
}
