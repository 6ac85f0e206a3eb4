package security

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/hyperfleet-io/hyperfleet/api"
	controlplanev1 "github.com/hyperfleet-io/hyperfleet/api/controlplane/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/builtin"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestSecretsOnlyWhereEnabled: with the RBAC the installation ships, neither the manager nor the
// bootstrap service (the process VMs talk to) can list Secrets anywhere, or read or write one in a
// namespace no admin enabled. Each row is a real request with the process's own token.
func TestSecretsOnlyWhereEnabled(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	const enabled, notEnabled = "secrets-enabled", "secrets-not-enabled"
	g.Expect(enable(ctx, enabled)).To(Succeed())
	g.Expect(createNamespace(ctx, notEnabled)).To(Succeed())
	for _, ns := range []string{enabled, notEnabled, inst.Namespace} {
		g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns}, StringData: map[string]string{"k": "v"}}))).To(Succeed())
	}
	bootstrapClient, err := client.New(inst.BootstrapService, client.Options{Scheme: api.NewScheme()})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = builtin.LoadOrCreateCA(ctx, bootstrapClient, inst.CASecret, spiffeid.RequireTrustDomainFromString("hyperfleet.local"))
	g.Expect(err).NotTo(HaveOccurred())

	clientOf := func(cfg *rest.Config) client.Client {
		c, err := client.New(cfg, client.Options{Scheme: api.NewScheme()})
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	manager, bootstrap := clientOf(inst.Manager), clientOf(inst.BootstrapService)
	get := func(ns, name string) func(client.Client) error {
		return func(c client.Client) error {
			return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
		}
	}
	list := func(opts ...client.ListOption) func(client.Client) error {
		return func(c client.Client) error { return c.List(ctx, &corev1.SecretList{}, opts...) }
	}
	create := func(ns string) func(client.Client) error {
		return func(c client.Client) error {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns}}
			if err := c.Create(ctx, s); err != nil {
				return err
			}
			return env.Client.Delete(ctx, s)
		}
	}
	// update reads a Secret as the admin and writes it back unchanged as the caller.
	update := func(ns, name string) func(client.Client) error {
		return func(c client.Client) error {
			s := &corev1.Secret{}
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
				return err
			}
			return c.Update(ctx, s)
		}
	}
	for _, tc := range []struct {
		name    string
		as      client.Client
		do      func(client.Client) error
		allowed bool
	}{
		{"manager lists every Secret", manager, list(), false},
		{"manager lists an enabled namespace", manager, list(client.InNamespace(enabled)), false},
		{"manager reads in an enabled namespace", manager, get(enabled, "creds"), true},
		{"manager writes in an enabled namespace", manager, create(enabled), true},
		{"manager reads in a namespace not enabled", manager, get(notEnabled, "creds"), false},
		{"manager writes in a namespace not enabled", manager, create(notEnabled), false},
		{"manager reads the identity CA", manager, get(inst.Namespace, inst.CASecret.Name), true},
		{"manager reads other Secrets of its namespace", manager, get(inst.Namespace, "creds"), false},
		{"manager writes in its namespace", manager, create(inst.Namespace), false},
		{"manager fills the provenance key Secret the install ships", manager, update(inst.Namespace, "hyperfleet-provenance-key"), true},
		{"manager rewrites the identity CA", manager, update(inst.Namespace, inst.CASecret.Name), false},
		{"manager rewrites another Secret of its namespace", manager, update(inst.Namespace, "creds"), false},
		{"bootstrap service rewrites the provenance key", bootstrap, update(inst.Namespace, "hyperfleet-provenance-key"), false},
		{"manager writes in kube-system", manager, create("kube-system"), false},
		{"bootstrap service lists every Secret", bootstrap, list(), false},
		{"bootstrap service lists its namespace", bootstrap, list(client.InNamespace(inst.Namespace)), false},
		{"bootstrap service reads in an enabled namespace", bootstrap, get(enabled, "creds"), true},
		{"bootstrap service writes in an enabled namespace", bootstrap, create(enabled), false},
		{"bootstrap service reads in a namespace not enabled", bootstrap, get(notEnabled, "creds"), false},
		{"bootstrap service writes in a namespace not enabled", bootstrap, create(notEnabled), false},
		{"bootstrap service reads its CA", bootstrap, get(inst.Namespace, inst.CASecret.Name), true},
		{"bootstrap service writes in its namespace (CA, TPM challenges)", bootstrap, create(inst.Namespace), true},
		{"bootstrap service writes in kube-system", bootstrap, create("kube-system"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.do(tc.as)
			if tc.allowed {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want 403, got %v", err)
		})
	}
}

// TestNamespaceNotEnabledIsReported: HyperFleet's objects in a namespace no admin enabled say so,
// with the fix, instead of failing in a loop; enabling the namespace as docs/install.md says heals
// them.
func TestNamespaceNotEnabledIsReported(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	const ns = "team-not-enabled"
	g.Expect(createNamespace(ctx, ns)).To(Succeed())
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t)

	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pve-credentials", Namespace: ns},
		StringData: map[string]string{connection.KeyTokenID: pvesim.TestTokenID, connection.KeyTokenSecret: pvesim.TestTokenSecret}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pve-ca", Namespace: ns},
		Data: map[string][]byte{"ca.crt": sim.CACertPEM()}})).To(Succeed())
	hc := builder.NewHypervisorCluster("pve", ns).WithEndpoint(strings.TrimSuffix(sim.URL(), "/api2/json")).
		WithCredentials("pve-credentials").WithCABundle("pve-ca", "").
		WithHealthCheckInterval(metav1.Duration{Duration: time.Second}).Build()
	g.Expect(env.Client.Create(ctx, hc)).To(Succeed())

	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: controlplanev1.GroupVersion.Group, Kind: "FleetControlPlane", Name: "fleet"}}}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	cp := &controlplanev1.FleetControlPlane{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: "fleet", UID: cluster.UID}}}}
	g.Expect(env.Client.Create(ctx, cp)).To(Succeed())

	type withConditions interface {
		client.Object
		conditions.Getter
	}
	reasonOf := func(obj withConditions, condition string) func(Gomega) string {
		return func(g Gomega) string {
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
			c := conditions.Get(obj, condition)
			g.Expect(c).NotTo(BeNil())
			if c.Reason == infrav1.NamespaceNotEnabledReason {
				g.Expect(c.Message).To(And(ContainSubstring("not enabled in namespace "+ns), ContainSubstring("docs/install.md")))
			}
			return c.Reason
		}
	}
	g.Eventually(reasonOf(hc, infrav1.ReadyCondition), 20*time.Second, 100*time.Millisecond).Should(Equal(infrav1.NamespaceNotEnabledReason))
	g.Eventually(reasonOf(cp, controlplanev1.AvailableCondition), 20*time.Second, 100*time.Millisecond).Should(Equal(controlplanev1.NamespaceNotEnabledReason))
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fleet-kubeconfig"}, &corev1.Secret{}))).To(BeTrue())

	g.Expect(enable(ctx, ns)).To(Succeed())
	// The FleetControlPlane retries a minute later; the HypervisorCluster at its next health check.
	g.Eventually(reasonOf(hc, infrav1.ReadyCondition), 20*time.Second, 100*time.Millisecond).Should(Equal(infrav1.HypervisorClusterAvailableReason))
}

// TestNoCrossNamespaceSecretReferences: bob, with edit in team-b, points his objects at team-a's
// Secrets. Secret references have no namespace field: the API refuses it (strict) or drops it, and
// HyperFleet looks in team-b, where there is nothing to find.
func TestNoCrossNamespaceSecretReferences(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	const teamA, teamB = "xns-team-a", "xns-team-b"
	for _, ns := range []string{teamA, teamB} {
		g.Expect(enable(ctx, ns)).To(Succeed())
	}
	bob := userClient(t, "bob-xns", teamB)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pve-credentials", Namespace: teamA},
		StringData: map[string]string{connection.KeyTokenID: pvesim.TestTokenID, connection.KeyTokenSecret: pvesim.TestTokenSecret}})).To(Succeed())

	// Bob cannot read team-a's Secret himself.
	g.Expect(apierrors.IsForbidden(bob.Get(ctx, client.ObjectKey{Namespace: teamA, Name: "pve-credentials"}, &corev1.Secret{}))).To(BeTrue())

	attack := func(kind, apiVersion string, spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind,
			"metadata": map[string]any{"name": "stolen", "namespace": teamB}, "spec": spec}}
	}
	hc := attack("HypervisorCluster", infrav1.GroupVersion.String(), map[string]any{
		"endpoint":              strings.TrimSuffix(sim.URL(), "/api2/json"),
		"credentialsRef":        map[string]any{"name": "pve-credentials", "namespace": teamA},
		"insecureSkipTLSVerify": true,
	})
	err := bob.Create(ctx, hc.DeepCopy(), client.FieldValidation("Strict"))
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("credentialsRef.namespace"))

	g.Expect(bob.Create(ctx, hc)).To(Succeed())
	got := &infrav1.HypervisorCluster{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: teamB, Name: "stolen"}, got)).To(Succeed())
		c := conditions.Get(got, infrav1.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(infrav1.HypervisorClusterCredentialsNotFoundReason))
		g.Expect(c.Message).To(ContainSubstring(teamB + "/pve-credentials"))
	}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: teamB, Name: "stolen"}, got)).To(Succeed())
		g.Expect(conditions.GetReason(got, infrav1.ReadyCondition)).To(Equal(infrav1.HypervisorClusterCredentialsNotFoundReason))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed(), "team-a's credentials never reach team-b's cluster")
	g.Expect(sim.Requests()).To(BeEmpty(), "no request reached Proxmox with team-a's token")
}

// TestSecretReferencesStayInTheirNamespace: every Secret reference a namespace user can write is a
// bare Secret name. A namespace field is refused (strict) and a name that would be a path ("../",
// "ns/name") is invalid, so no reference can leave the object's namespace.
func TestSecretReferencesStayInTheirNamespace(t *testing.T) {
	ctx := context.Background()
	const ns = "xns-refs"
	NewWithT(t).Expect(enable(ctx, ns)).To(Succeed())
	bob := userClient(t, "bob-refs", ns)
	toUnstructured := func(obj client.Object) *unstructured.Unstructured {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(mustGVK(t, obj))
		return u
	}
	hc := func(name string) *unstructured.Unstructured {
		return toUnstructured(builder.NewHypervisorCluster(name, ns).WithCABundle("ca", "").Build())
	}
	pool := func(name string) *unstructured.Unstructured {
		return toUnstructured(builder.NewRunnerPool(name, ns).Build())
	}
	claim := func(name string) *unstructured.Unstructured {
		return toUnstructured(builder.NewMachineClaim(name, ns).WithBootstrapSecret("data").Build())
	}
	for _, tc := range []struct {
		name  string
		obj   *unstructured.Unstructured
		field []string
		value any
	}{
		{"HypervisorCluster credentials in another namespace", hc("hc-ns"), []string{"spec", "credentialsRef", "namespace"}, "xns-team-a"},
		{"HypervisorCluster credentials by path", hc("hc-path"), []string{"spec", "credentialsRef", "name"}, "../xns-team-a/pve-credentials"},
		{"HypervisorCluster CA bundle by path", hc("hc-ca"), []string{"spec", "caBundleRef", "name"}, "xns-team-a/pve-ca"},
		{"RunnerPool GitHub App in another namespace", pool("pool-ns"), []string{"spec", "platform", "github", "credentialsRef", "namespace"}, "xns-team-a"},
		{"RunnerPool GitHub App by path", pool("pool-path"), []string{"spec", "platform", "github", "credentialsRef", "name"}, "xns-team-a/github-app"},
		{"RunnerPool GitHub CA bundle by path", pool("pool-ca"), []string{"spec", "platform", "github", "caBundleRef", "name"}, "xns-team-a/github-ca"},
		{"MachineClaim bootstrap data by path", claim("claim-path"), []string{"spec", "bootstrap", "dataSecretName"}, "../xns-team-a/data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(unstructured.SetNestedField(tc.obj.Object, tc.value, tc.field...)).To(Succeed())
			err := bob.Create(ctx, tc.obj, client.FieldValidation("Strict"))
			g.Expect(err).To(HaveOccurred(), "the API must refuse a Secret reference outside the namespace")
			g.Expect(err.Error()).To(ContainSubstring(strings.Join(tc.field[1:], ".")))
		})
	}
}

func mustGVK(t *testing.T, obj client.Object) schema.GroupVersionKind {
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, api.NewScheme())
	if err != nil {
		t.Fatal(err)
	}
	return gvk
}
