package console

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/console"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
)

// TestUnverifiedEmailGetsNoAccess plays eve, who holds the console's role and gave the identity
// provider bob's address without proving it is hers (email_verified false). Neither her bearer
// token nor her browser sign-in becomes bob: she is refused before Kubernetes is asked, and bob's
// VM in team-b is neither seen, deleted nor joined by one of hers.
func TestUnverifiedEmailGetsNoAccess(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := startConsole(t)
	bobs := builder.NewMachineClaim("bobs-verified-vm", teamB).WithTemplate(infrav1.TemplateSource{ID: "9000"}).
		WithHypervisorCluster("pve").WithBootstrapSecret("bobs-verified-vm-user-data").Build()
	g.Expect(env.Client.Create(ctx, bobs)).To(Succeed())

	// bob himself, with a verified address, sees his VM: the refusals below are eve's alone.
	r := f.call(t, http.MethodGet, "/api/v1/vms?namespace="+teamB, f.token(t, bob, fakeoidc.TokenOptions{}), nil)
	g.Expect(r.Status).To(Equal(http.StatusOK), string(r.Body))
	g.Expect(string(r.Body)).To(ContainSubstring("bobs-verified-vm"))

	t.Run("bearer token", func(t *testing.T) {
		for name, tok := range map[string]string{
			"email_verified false":    f.token(t, eve, fakeoidc.TokenOptions{}),
			"email_verified a string": f.token(t, eve, fakeoidc.TokenOptions{Extra: map[string]any{"email_verified": "true"}}),
		} {
			t.Run(name, func(t *testing.T) {
				for _, tc := range []struct {
					method, path string
					body         any
				}{
					{http.MethodGet, "/api/v1/vms", nil},
					{http.MethodGet, "/api/v1/vms?namespace=" + teamB, nil},
					{http.MethodGet, "/api/v1/vms/" + teamB + "/bobs-verified-vm", nil},
					{http.MethodGet, "/api/v1/jobs/create:" + teamB + ":bobs-verified-vm", nil},
					{http.MethodDelete, "/api/v1/vms/" + teamB + "/bobs-verified-vm", nil},
					{http.MethodPost, "/api/v1/vms", console.CreateVMRequest{Namespace: teamB, Name: "eves-vm", Cluster: "pve", Template: "9000"}},
				} {
					g := NewWithT(t)
					r := f.call(t, tc.method, tc.path, tok, tc.body)
					g.Expect(r.Status).To(Equal(http.StatusForbidden), "%s %s: %s", tc.method, tc.path, r.Body)
					g.Expect(r.problem(t).Detail).To(ContainSubstring("not verified"))
				}
			})
		}
	})

	t.Run("browser sign-in", func(t *testing.T) {
		g := NewWithT(t)
		b := newBrowser(t)
		status, page, _ := f.signIn(t, b, eve, false)
		g.Expect(status).To(Equal(http.StatusForbidden), page)
		g.Expect(page).To(ContainSubstring("not verified"))
		u, _ := url.Parse(f.URL)
		for _, c := range b.Jar.Cookies(u) {
			g.Expect(c.Name).NotTo(Equal("hyperfleet_session"), "eve got a session")
		}
		r := f.send(t, b.Client, http.MethodGet, "/api/v1/vms?namespace="+teamB, nil, nil)
		g.Expect(r.Status).To(Equal(http.StatusUnauthorized))
	})

	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(bobs), bobs)).To(Succeed())
	g.Expect(bobs.DeletionTimestamp.IsZero()).To(BeTrue(), "bob's claim survived")
	g.Expect(apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Namespace: teamB, Name: "eves-vm"}, &infrav1.MachineClaim{}))).To(BeTrue())
}
