package security

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/api"
	controlplanev1 "github.com/hyperfleet-io/hyperfleet/api/controlplane/v1alpha1"
)

// TestFleetControlPlaneCannotMintForeignTokens: a namespace user with edit asks a FleetControlPlane
// for the token of a kube-system ServiceAccount, sent to a server of their choice. The API refuses
// both fields, and the kubeconfig Secret that appears holds only the workload reader's token for the
// manager's own API server.
func TestFleetControlPlaneCannotMintForeignTokens(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "fcp-team-a"
	g.Expect(enable(ctx, ns)).To(Succeed())
	alice := userClient(t, "alice-fcp", ns)
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "powerful-controller", Namespace: "kube-system"}}))).To(Succeed())
	startManager(t)

	// The platform team made the team a Cluster; the attacker adds its control plane.
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: clusterv1.ClusterSpec{ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: controlplanev1.GroupVersion.Group, Kind: "FleetControlPlane", Name: "fleet"}}}
	g.Expect(env.Client.Create(ctx, cluster)).To(Succeed())
	attack := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": controlplanev1.GroupVersion.String(), "kind": "FleetControlPlane",
			"metadata": map[string]any{"name": "fleet", "namespace": ns, "ownerReferences": []any{map[string]any{
				"apiVersion": clusterv1.GroupVersion.String(), "kind": "Cluster", "name": "fleet", "uid": string(cluster.UID)}}},
			"spec": map[string]any{
				"serviceAccountRef": map[string]any{"namespace": "kube-system", "name": "powerful-controller"},
				"server":            "https://attacker.example.com",
			},
		}}
		return u
	}
	err := alice.Create(ctx, attack(), client.FieldValidation("Strict"))
	g.Expect(err).To(HaveOccurred(), "the API must not accept a ServiceAccount or a server chosen by the user")
	g.Expect(err.Error()).To(And(ContainSubstring("serviceAccountRef"), ContainSubstring("server")))

	// Without strict validation the fields are dropped, and the manager does what it always does.
	g.Expect(alice.Create(ctx, attack())).To(Succeed())
	secret := &corev1.Secret{}
	g.Eventually(func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fleet-kubeconfig"}, secret)
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	kubeconfig, err := clientcmd.Load(secret.Data["value"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kubeconfig.Clusters).To(HaveEach(HaveField("Server", inst.Manager.Host)))
	g.Expect(kubeconfig.AuthInfos).To(HaveLen(1))
	for _, auth := range kubeconfig.AuthInfos {
		review := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: auth.Token}}
		g.Expect(env.Client.Create(ctx, review)).To(Succeed())
		g.Expect(review.Status.Authenticated).To(BeTrue())
		g.Expect(review.Status.User.Username).To(Equal("system:serviceaccount:" + inst.WorkloadReader.Namespace + ":" + inst.WorkloadReader.Name))
	}
}

// TestManagerMintsNoOtherTokens: even if a bug let a user steer the manager, the RBAC the
// installation ships lets it request tokens for the workload reader only.
func TestManagerMintsNoOtherTokens(t *testing.T) {
	ctx := context.Background()
	manager, err := client.New(inst.Manager, client.Options{Scheme: api.NewScheme()})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	g := NewWithT(t)
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "powerful-controller", Namespace: "kube-system"}}))).To(Succeed())
	for _, tc := range []struct {
		name, namespace, sa string
		allowed             bool
	}{
		{"workload reader", inst.WorkloadReader.Namespace, inst.WorkloadReader.Name, true},
		{"kube-system controller", "kube-system", "powerful-controller", false},
		{"the manager itself", inst.ManagerServiceAccount.Namespace, inst.ManagerServiceAccount.Name, false},
		{"the bootstrap service", inst.BootstrapServiceAccount.Namespace, inst.BootstrapServiceAccount.Name, false},
		{"a team's default", "default", "default", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tr := &authenticationv1.TokenRequest{}
			err := manager.SubResource("token").Create(ctx,
				&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: tc.namespace, Name: tc.sa}}, tr)
			if tc.allowed {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(tr.Status.Token).NotTo(BeEmpty())
				return
			}
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want 403, got %v", err)
		})
	}
}
