package bootstrapconfig_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/bootstrapconfig"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/bootstraptest"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/builtin"
)

func TestMain(m *testing.M) { controllertest.Main(m, "an API server and the manager") }

// startBootstrapController runs only the BootstrapConfig controller, with a builtin provisioner
// whose CA lives in caNamespace.
func startBootstrapController(t *testing.T, caNamespace string) {
	t.Helper()
	startBootstrapControllerWith(t, caNamespace, nil)
}

// startBootstrapControllerWith is startBootstrapController with the reconciler adjusted by mutate.
func startBootstrapControllerWith(t *testing.T, caNamespace string, mutate func(*bootstrapconfig.Reconciler)) {
	t.Helper()
	g := NewWithT(t)
	mgr, err := ctrl.NewManager(controllertest.Env.Config, ctrl.Options{
		Scheme: controllertest.Env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		// Each test runs its own manager; controller names repeat across them.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	r := &bootstrapconfig.Reconciler{
		Client:      mgr.GetClient(),
		APIReader:   mgr.GetAPIReader(),
		Recorder:    mgr.GetEventRecorderFor("bootstrapconfig-controller"),
		Provisioner: builtin.NewProvisioner(mgr.GetClient(), types.NamespacedName{Namespace: caNamespace, Name: "bootstrap-ca"}, spiffeid.RequireTrustDomainFromString("hyperfleet.test")),
		ServiceURL:  "https://bootstrap.hyperfleet.test:8443",
		TrustDomain: "hyperfleet.test",
	}
	if mutate != nil {
		mutate(r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	g.Expect(r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2})).To(Succeed())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mgr.Start(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// reconcileErrors is controller-runtime's count of failed reconciles of a controller (all managers
// of the test process together).
func reconcileErrors(controller string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return 0
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// runnerMachine creates a Cluster (infrastructure provisioned unless told otherwise), and a Machine
// of pool with its BootstrapConfig.
func runnerMachine(t *testing.T, ns, name, pool string, provisioned bool, mutate func(*bootstrapv1.BootstrapConfig)) (*clusterv1.Cluster, *clusterv1.Machine, *bootstrapv1.BootstrapConfig) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	cluster := bootstraptest.NewCluster(ns)
	g.Expect(controllertest.Env.Client.Create(ctx, cluster)).To(Succeed())
	if provisioned {
		setInfrastructureProvisioned(t, cluster)
	}
	m, bc := runnerMachineInCluster(t, ns, name, pool, mutate)
	return cluster, m, bc
}

// runnerMachineInCluster creates a Machine of pool in the fixture Cluster, with its BootstrapConfig.
func runnerMachineInCluster(t *testing.T, ns, name, pool string, mutate func(*bootstrapv1.BootstrapConfig)) (*clusterv1.Machine, *bootstrapv1.BootstrapConfig) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	m := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			clusterv1.ClusterNameLabel: bootstraptest.ClusterName, "hyperfleet.io/runner-pool": pool}},
		Spec: clusterv1.MachineSpec{
			ClusterName: bootstraptest.ClusterName,
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapv1.GroupVersion.Group, Kind: "BootstrapConfig", Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MachineClaim", Name: name},
		},
	}
	g.Expect(controllertest.Env.Client.Create(ctx, m)).To(Succeed())
	bc := &bootstrapv1.BootstrapConfig{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		Labels:          map[string]string{clusterv1.ClusterNameLabel: bootstraptest.ClusterName},
		OwnerReferences: []metav1.OwnerReference{bootstraptest.MachineOwnerRef(m)}}}
	if mutate != nil {
		mutate(bc)
	}
	g.Expect(controllertest.Env.Client.Create(ctx, bc)).To(Succeed())
	return m, bc
}

func setInfrastructureProvisioned(t *testing.T, cluster *clusterv1.Cluster) {
	t.Helper()
	g := NewWithT(t)
	// Cluster API's controllers (running for the package's other tests) may write the Cluster
	// too: re-read and retry on a conflict.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := controllertest.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return err
		}
		cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
		return controllertest.Env.Client.Status().Update(context.Background(), cluster)
	})).To(Succeed())
}

func newCANamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "hyperfleet-ca-"}}
	NewWithT(t).Expect(controllertest.Env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}
