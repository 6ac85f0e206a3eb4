package fleetcontrolplane_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "github.com/hyperfleet-io/hyperfleet/api/controlplane/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

func TestMain(m *testing.M) { controllertest.Main(m, "an API server and the manager") }

// workloadReader creates the node-reading ServiceAccount FleetControlPlane kubeconfigs use.
func workloadReader(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "hyperfleet-workload-reader", Namespace: "default"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "hyperfleet-workload-reader"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}},
				// Cluster API's connection health probe is GET /.
				{NonResourceURLs: []string{"/"}, Verbs: []string{"get"}},
			}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "hyperfleet-workload-reader"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "hyperfleet-workload-reader"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "hyperfleet-workload-reader", Namespace: "default"}}},
	}
	for _, o := range objs {
		if err := controllertest.Env.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// TestMachineHealthCheckRemediatesStuckRunner runs the real Cluster API MachineHealthCheck against
// runners that never bootstrap: MHC finds their Machines unhealthy by condition, and the RunnerPool,
// as their owner, deletes and replaces them the way a MachineSet does.
func TestMachineHealthCheckRemediatesStuckRunner(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	controllertest.StartCAPI(t)
	workloadReader(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	controllertest.StartManager(t)
	ns := controllertest.NewNamespace(t)
	controllertest.ProxmoxCluster(t, ns, "pve", sim)
	cp := &controlplanev1.FleetControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns}}
	g.Expect(controllertest.Env.Client.Create(ctx, cp)).To(Succeed())
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: clusterv1.ClusterSpec{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "HypervisorCluster", Name: "pve"},
			ControlPlaneRef:   clusterv1.ContractVersionedObjectReference{APIGroup: controlplanev1.GroupVersion.Group, Kind: "FleetControlPlane", Name: "fleet"},
		},
	}
	g.Expect(controllertest.Env.Client.Create(ctx, cluster)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, cluster)
		g.Expect(ptr.Deref(got.Status.Initialization.ControlPlaneInitialized, false)).To(BeTrue())
		g.Expect(ptr.Deref(got.Status.Initialization.InfrastructureProvisioned, false)).To(BeTrue())
		g.Expect(controllertest.Get(g, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "fleet-kubeconfig", Namespace: ns}}).Type).To(Equal(clusterv1.ClusterSecretType))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed(), "Cluster API sees an initialized control plane")

	controllertest.RunnerTemplates(t, ns)
	pool := builder.NewRunnerPool("stuck", ns).WithCluster("fleet").WithBounds(1, 2).WithTemplates("runner", "runner").Build()
	g.Expect(controllertest.Env.Client.Create(ctx, pool)).To(Succeed())
	var first string
	g.Eventually(func(g Gomega) {
		ms := controllertest.PoolMachines(g, pool)
		g.Expect(ms).To(HaveLen(1))
		first = ms[0].Name
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	mhc := &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Name: "runners", Namespace: ns},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: "fleet",
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{fleetv1.RunnerPoolNameLabel: "stuck"}},
			Checks: clusterv1.MachineHealthCheckChecks{
				NodeStartupTimeoutSeconds: ptr.To[int32](0),
				UnhealthyMachineConditions: []clusterv1.UnhealthyMachineCondition{{
					Type: clusterv1.MachineInfrastructureReadyCondition, Status: metav1.ConditionFalse, TimeoutSeconds: ptr.To[int32](5)}},
			},
		},
	}
	g.Expect(controllertest.Env.Client.Create(ctx, mhc)).To(Succeed())

	g.Eventually(func(g Gomega) {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: first, Namespace: ns}}
		err := controllertest.Env.Client.Get(ctx, controllertest.KeyOf(m), m)
		g.Expect(apierrors.IsNotFound(err) || !m.DeletionTimestamp.IsZero()).To(BeTrue(), "the stuck Machine is remediated")
		ms := controllertest.PoolMachines(g, pool)
		g.Expect(ms).To(HaveLen(1), "and replaced")
		g.Expect(ms[0].Name).NotTo(Equal(first))
	}, 90*time.Second, 500*time.Millisecond).Should(Succeed())
	got := controllertest.Get(g, mhc)
	t.Logf("MachineHealthCheck: expected=%v healthy=%v conditions=%v", ptr.Deref(got.Status.ExpectedMachines, -1),
		ptr.Deref(got.Status.CurrentHealthy, -1), conditions.GetReason(got, clusterv1.ReadyCondition))
}
