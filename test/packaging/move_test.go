package packaging

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "github.com/hyperfleet-io/hyperfleet/api/controlplane/v1alpha1"
	hyperfleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

// TestClusterctlMove moves a runner fleet between two management clusters with the real clusterctl.
// No controllers run: the test plays Cluster API core and a minimal control plane by setting the
// status and owner references they would, so it checks what clusterctl's move graph makes of
// HyperFleet's objects. It also pins down clusterctl's two refusals that matter for runner fleets:
// a Cluster without an initialized control plane, and any Machine without a Node, which every
// runner is.
func TestClusterctlMove(t *testing.T) {
	if testing.Short() {
		t.Skip("starts another API server")
	}
	// The package's API server is the source; one more is the target.
	from, to := env, startAPIServer(t)
	installProviders(t, from)
	installProviders(t, to)
	ctx := context.Background()
	const ns = "fleet"

	fleet := generateFleet(t, ns)
	for _, e := range []*testenv.Env{from, to} {
		createNamespace(t, e, ns)
	}
	applyTo(t, from, fleet)
	markInfrastructureProvisioned(t, from, ns, "demo")

	// Without a control plane that reports itself initialized, clusterctl will not move a Cluster.
	t.Run("refused until the control plane is initialized", func(t *testing.T) {
		out, err := tryMove(from, to, ns)
		g := NewWithT(t)
		g.Expect(err).To(HaveOccurred())
		g.Expect(string(out)).To(ContainSubstring("is not yet initialized"))
	})

	markControlPlaneInitialized(t, from, ns, "demo")

	t.Run("refused while a runner Machine has no Node", func(t *testing.T) {
		g := NewWithT(t)
		machine := runnerMachine(ns, "demo-runners-abcde")
		g.Expect(from.Client.Create(ctx, machine)).To(Succeed())
		out, err := tryMove(from, to, ns)
		g.Expect(err).To(HaveOccurred())
		g.Expect(string(out)).To(ContainSubstring("is still provisioning the node"))
		g.Expect(from.Client.Delete(ctx, machine)).To(Succeed())
	})

	t.Run("moves an idle fleet", func(t *testing.T) {
		g := NewWithT(t)
		out, err := tryMove(from, to, ns)
		g.Expect(err).NotTo(HaveOccurred(), "%s", out)
		for _, o := range decode(t, fleet) {
			key := client.ObjectKey{Namespace: ns, Name: o.GetName()}
			probe := &unstructured.Unstructured{}
			probe.SetGroupVersionKind(o.GroupVersionKind())
			g.Expect(to.Client.Get(ctx, key, probe)).To(Succeed(), "%s %s not in the target cluster", o.GetKind(), o.GetName())
			err := from.Client.Get(ctx, key, probe)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s %s still in the source cluster: %v", o.GetKind(), o.GetName(), err)
		}
		// Move pauses the Cluster while copying and resumes it in the target.
		moved := &clusterv1.Cluster{}
		g.Expect(to.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo"}, moved)).To(Succeed())
		g.Expect(ptr.Deref(moved.Spec.Paused, false)).To(BeFalse())
	})
}

func startAPIServer(t *testing.T) *testenv.Env {
	t.Helper()
	e, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	return e
}

// installProviders installs what `clusterctl init --infrastructure hyperfleet --bootstrap hyperfleet`
// would: the providers' components (CRDs labelled for clusterctl) and the provider inventory. Cluster
// API core's CRDs come with testenv; they get clusterctl's label here.
func installProviders(t *testing.T, e *testenv.Env) {
	t.Helper()
	config := localRepository(t)
	for _, flag := range []string{"--infrastructure", "--bootstrap"} {
		applyTo(t, e, run(t, nil, clusterctlEnv(t), env.Tools.Clusterctl(), "generate", "provider", flag, "hyperfleet:v0.1.0", "--config", config))
	}
	kubectl := []string{"--kubeconfig", e.KubeconfigPath}
	var capiCRDs []string
	for _, name := range strings.Fields(string(run(t, nil, nil, env.Tools.Kubectl(), append(kubectl, "get", "crd", "-o", "name")...))) {
		if strings.HasSuffix(name, ".cluster.x-k8s.io") && !strings.Contains(name, "hyperfleet") {
			capiCRDs = append(capiCRDs, name)
		}
	}
	run(t, nil, nil, env.Tools.Kubectl(), append(append(kubectl, "label", "--overwrite"), append(capiCRDs, "clusterctl.cluster.x-k8s.io=")...)...)
	// clusterctl installs its inventory CRD on first use; install it now so Provider objects can be written.
	applyTo(t, e, readTestdata(t, "clusterctl-api.yaml"))
	run(t, nil, nil, env.Tools.Kubectl(), append(kubectl, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/providers.clusterctl.cluster.x-k8s.io")...)
	createNamespace(t, e, "capi-system")
	for _, p := range []struct{ ns, name, provider, typ, version string }{
		{"capi-system", "cluster-api", "cluster-api", "CoreProvider", "v1.12.5"},
		{namespace, "infrastructure-hyperfleet", "hyperfleet", "InfrastructureProvider", "v0.1.0"},
		{namespace, "bootstrap-hyperfleet", "hyperfleet", "BootstrapProvider", "v0.1.0"},
	} {
		applyTo(t, e, []byte(fmt.Sprintf(`apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Provider
metadata:
  name: %s
  namespace: %s
  labels: {clusterctl.cluster.x-k8s.io: ""}
providerName: %s
type: %s
version: %s
`, p.name, p.ns, p.provider, p.typ, p.version)))
	}
}

// generateFleet renders the org flavor as a user would.
func generateFleet(t *testing.T, ns string) []byte {
	t.Helper()
	vars := append(clusterctlEnv(t), fleetVariables...)
	return run(t, nil, vars, env.Tools.Clusterctl(), "generate", "cluster", "demo",
		"--from", filepath.Join(env.RepoRoot, "templates", "cluster-template-org.yaml"), "--target-namespace", ns)
}

// markInfrastructureProvisioned sets what Cluster API core would once the HypervisorCluster is
// provisioned: the Cluster owns it (and its FleetControlPlane) and reports its infrastructure
// provisioned.
func markInfrastructureProvisioned(t *testing.T, e *testenv.Env, ns, name string) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	cluster := &clusterv1.Cluster{}
	g.Expect(e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
	owner := []metav1.OwnerReference{{
		APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID,
	}}
	hc := &infrav1.HypervisorCluster{}
	g.Expect(e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hc)).To(Succeed())
	hc.OwnerReferences = owner
	g.Expect(e.Client.Update(ctx, hc)).To(Succeed())
	cp := &controlplanev1.FleetControlPlane{}
	g.Expect(e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cp)).To(Succeed())
	cp.OwnerReferences = owner
	g.Expect(e.Client.Update(ctx, cp)).To(Succeed())
	// Cluster API's MachineHealthCheck controller makes the Cluster own each MachineHealthCheck.
	mhcs := &clusterv1.MachineHealthCheckList{}
	g.Expect(e.Client.List(ctx, mhcs, client.InNamespace(ns))).To(Succeed())
	for i := range mhcs.Items {
		mhcs.Items[i].OwnerReferences = owner
		g.Expect(e.Client.Update(ctx, &mhcs.Items[i])).To(Succeed())
	}
	cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	g.Expect(e.Client.Status().Update(ctx, cluster)).To(Succeed())

	// The RunnerPool is in the move graph through its CRD's move-hierarchy label; check it is there.
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	g.Expect(e.Client.Get(ctx, client.ObjectKey{Name: "runnerpools.hyperfleet.io"}, crd)).To(Succeed())
	g.Expect(crd.GetLabels()).To(HaveKey("clusterctl.cluster.x-k8s.io/move-hierarchy"))
	pools := &hyperfleetv1.RunnerPoolList{}
	g.Expect(e.Client.List(ctx, pools, client.InNamespace(ns))).To(Succeed())
	g.Expect(pools.Items).To(HaveLen(1))
}

// markControlPlaneInitialized sets what Cluster API core mirrors from an initialized control plane
// (the FleetControlPlane controller's job in a real management cluster).
func markControlPlaneInitialized(t *testing.T, e *testenv.Env, ns, name string) {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	cluster := &clusterv1.Cluster{}
	g.Expect(e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cluster)).To(Succeed())
	cluster.Status.Initialization.ControlPlaneInitialized = ptr.To(true)
	meta.SetStatusCondition(&cluster.Status.Conditions, metav1.Condition{
		Type: clusterv1.ClusterControlPlaneInitializedCondition, Status: metav1.ConditionTrue, Reason: "Initialized",
	})
	g.Expect(e.Client.Status().Update(ctx, cluster)).To(Succeed())
}

// runnerMachine is a runner's Machine as a RunnerPool makes it: provisioned, never a Node.
func runnerMachine(ns, name string) *clusterv1.Machine {
	return &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			clusterv1.ClusterNameLabel: "demo", hyperfleetv1.RunnerPoolNameLabel: "demo-runners",
		}},
		Spec: clusterv1.MachineSpec{
			ClusterName: "demo",
			Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To(name)},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MachineClaim", Name: name,
			},
		},
	}
}

func tryMove(from, to *testenv.Env, ns string) ([]byte, error) {
	home, err := os.MkdirTemp(env.TempDir(), "clusterctl-home-")
	if err != nil {
		return nil, err
	}
	return tryRun(nil, []string{"CLUSTERCTL_DISABLE_VERSIONCHECK=true", "HOME=" + home, "XDG_CONFIG_HOME=" + home},
		env.Tools.Clusterctl(), "move", "--kubeconfig", from.KubeconfigPath, "--to-kubeconfig", to.KubeconfigPath,
		"--namespace", ns, "-v", "3")
}

func createNamespace(t *testing.T, e *testenv.Env, name string) {
	t.Helper()
	applyTo(t, e, []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+name+"\n"))
}

// applyTo applies manifests for real to e.
func applyTo(t *testing.T, e *testenv.Env, manifests []byte) {
	t.Helper()
	run(t, manifests, nil, env.Tools.Kubectl(), "--kubeconfig", e.KubeconfigPath, "apply", "--server-side",
		"--force-conflicts", "--field-manager=hyperfleet-packaging-test", "-f", "-")
}
