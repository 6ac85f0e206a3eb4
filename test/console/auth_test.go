package console

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/console"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
)

// TestBearerTokensAreVerified plays an API client with every kind of bad token: only a token the
// issuer signed, for the console's client ID, unexpired and carrying a console role gets in.
func TestBearerTokensAreVerified(t *testing.T) {
	f := startConsole(t)
	attackerKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/vms?namespace=" + teamA
	for _, tc := range []struct {
		name   string
		header string
		want   int
	}{
		{"a valid token with the role", "Bearer " + f.token(t, alice, fakeoidc.TokenOptions{}), http.StatusOK},
		{"a valid token with the read-only role", "Bearer " + f.token(t, victor, fakeoidc.TokenOptions{}), http.StatusOK},
		{"no token", "", http.StatusUnauthorized},
		{"not a bearer token", "Basic YWxpY2U6YWxpY2UtcHc=", http.StatusUnauthorized},
		{"garbage", "Bearer not-a-jwt", http.StatusUnauthorized},
		{"an expired token", "Bearer " + f.token(t, alice, fakeoidc.TokenOptions{ExpiresIn: -time.Minute}), http.StatusUnauthorized},
		{"a token for another audience", "Bearer " + f.token(t, alice, fakeoidc.TokenOptions{Audience: "some-other-app"}), http.StatusUnauthorized},
		{"a token of another issuer", "Bearer " + f.token(t, alice, fakeoidc.TokenOptions{Issuer: "https://evil.example.com"}), http.StatusUnauthorized},
		{"a token signed by another key", "Bearer " + f.token(t, alice, fakeoidc.TokenOptions{SigningKey: attackerKey}), http.StatusUnauthorized},
		{"a valid token without the role", "Bearer " + f.token(t, carol, fakeoidc.TokenOptions{}), http.StatusForbidden},
		{"a valid token with the role as a bare string claim of another name", "Bearer " + f.token(t, carol, fakeoidc.TokenOptions{Extra: map[string]any{"role": operatorRole}}), http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			r := f.send(t, http.DefaultClient, http.MethodGet, path, nil, func(h http.Header) {
				if tc.header != "" {
					h.Set("Authorization", tc.header)
				}
			})
			g.Expect(r.Status).To(Equal(tc.want), string(r.Body))
			if tc.want != http.StatusOK {
				g.Expect(r.problem(t).Status).To(Equal(tc.want))
			}
			if tc.want == http.StatusUnauthorized {
				g.Expect(r.Header.Get("WWW-Authenticate")).To(HavePrefix("Bearer"))
			}
		})
	}
}

// TestReadOnlyRoleCannotChange: the read-only role sees, but every change is refused before
// Kubernetes is asked, even where the person's RBAC would allow it.
func TestReadOnlyRoleCannotChange(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := startConsole(t)
	claim := builder.NewMachineClaim("ro-target", teamA).WithTemplate(infrav1.TemplateSource{ID: "9000"}).
		WithHypervisorCluster("pve").WithBootstrapSecret("ro-target-user-data").Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	pool := builder.NewRunnerPool("ro-pool", teamA).WithCluster("fleet").WithBounds(0, 5).WithLabels("linux").Build()
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())
	// Even a viewer given edit must not change anything through the console.
	g.Expect(env.GrantClusterRole(ctx, teamA, "edit", "oidc:victor@example.com")).To(Succeed())

	tok := f.token(t, victor, fakeoidc.TokenOptions{})
	g.Expect(f.call(t, http.MethodGet, "/api/v1/vms?namespace="+teamA, tok, nil).Status).To(Equal(http.StatusOK))
	for _, tc := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/api/v1/vms", console.CreateVMRequest{Namespace: teamA, Name: "ro-new", Cluster: "pve", Template: "9000"}},
		{http.MethodPost, "/api/v1/vms/create", console.CreateVMRequest{Namespace: teamA, Name: "ro-new", Cluster: "pve", Template: "9000"}},
		{http.MethodDelete, "/api/v1/vms/" + teamA + "/ro-target", nil},
		{http.MethodPost, "/api/v1/vms/delete", console.VMRef{Namespace: teamA, Name: "ro-target"}},
		{http.MethodPost, "/api/v1/vms/" + teamA + "/ro-target/power-off", nil},
		{http.MethodPatch, "/api/v1/pools/" + teamA + "/ro-pool", map[string]any{"replicas": 3}},
	} {
		r := f.call(t, tc.method, tc.path, tok, tc.body)
		g.Expect(r.Status).To(Equal(http.StatusForbidden), "%s %s: %s", tc.method, tc.path, r.Body)
	}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed())
	g.Expect(claim.DeletionTimestamp.IsZero()).To(BeTrue(), "the claim was not deleted")
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: teamA, Name: "ro-new"}, &infrav1.MachineClaim{}))).To(BeTrue())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pool), pool)).To(Succeed())
	g.Expect(pool.Spec.Replicas).To(BeNil(), "the pool was not scaled")
}

// TestNamespaceRBACDecides: alice, with edit in team-a only, can neither see nor touch team-b's VMs
// through the console, which holds no such rights of its own and acts as her; a token naming
// Kubernetes' admin group gains nothing.
func TestNamespaceRBACDecides(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := startConsole(t)
	mine := builder.NewMachineClaim("alices-vm", teamA).WithTemplate(infrav1.TemplateSource{ID: "9000"}).
		WithHypervisorCluster("pve").WithBootstrapSecret("alices-vm-user-data").Build()
	theirs := builder.NewMachineClaim("bobs-vm", teamB).WithTemplate(infrav1.TemplateSource{ID: "9000"}).
		WithHypervisorCluster("pve").WithBootstrapSecret("bobs-vm-user-data").Build()
	g.Expect(env.Client.Create(ctx, mine)).To(Succeed())
	g.Expect(env.Client.Create(ctx, theirs)).To(Succeed())

	names := func(r response) []string {
		var l console.List[console.VM]
		r.decode(t, &l)
		var out []string
		for _, v := range l.Items {
			out = append(out, v.Namespace+"/"+v.Name)
		}
		return out
	}
	for _, who := range []fakeoidc.User{alice, mallory} {
		t.Run(who.Username, func(t *testing.T) {
			g := NewWithT(t)
			tok := f.token(t, who, fakeoidc.TokenOptions{})
			all := f.call(t, http.MethodGet, "/api/v1/vms", tok, nil)
			g.Expect(all.Status).To(Equal(http.StatusOK), string(all.Body))
			g.Expect(names(all)).NotTo(ContainElement(teamB + "/bobs-vm"))
			if who.Username == "alice" {
				g.Expect(names(all)).To(ContainElement(teamA+"/alices-vm"), "impersonation works: alice sees her own VM")
			}
			for _, tc := range []struct {
				method, path string
				body         any
			}{
				{http.MethodGet, "/api/v1/vms?namespace=" + teamB, nil},
				{http.MethodGet, "/api/v1/vms/" + teamB + "/bobs-vm", nil},
				{http.MethodGet, "/api/v1/jobs/create:" + teamB + ":bobs-vm", nil},
				{http.MethodGet, "/api/v1/jobs/create:" + teamB + ":bobs-vm/log", nil},
				{http.MethodDelete, "/api/v1/vms/" + teamB + "/bobs-vm", nil},
				{http.MethodPost, "/api/v1/vms/delete", console.VMRef{Namespace: teamB, Name: "bobs-vm"}},
				{http.MethodPost, "/api/v1/vms", console.CreateVMRequest{Namespace: teamB, Name: "planted", Cluster: "pve", Template: "9000"}},
			} {
				r := f.call(t, tc.method, tc.path, tok, tc.body)
				g.Expect(r.Status).To(Equal(http.StatusForbidden), "%s %s: %s", tc.method, tc.path, r.Body)
				g.Expect(r.problem(t).Title).To(Equal("Forbidden by Kubernetes RBAC"))
			}
		})
	}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), theirs)).To(Succeed())
	g.Expect(theirs.DeletionTimestamp.IsZero()).To(BeTrue(), "team-b's claim survived")
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: teamB, Name: "planted"}, &infrav1.MachineClaim{}))).To(BeTrue())
}
