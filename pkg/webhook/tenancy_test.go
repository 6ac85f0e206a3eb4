package webhook_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/webhook"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// otherTeam makes another namespace with a pool named name for spec, whose credentials Secret
// holds data, as a second team would.
func otherTeam(t *testing.T, name string, spec fleetv1.GitHubSpec, data map[string]string) *fleetv1.RunnerPool {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "team-b-"}}
	g.Expect(env.Client.Create(ctx, ns)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github-app", Namespace: ns.Name},
		StringData: data})).To(Succeed())
	spec.CredentialsRef = fleetv1.LocalObjectReference{Name: "github-app"}
	createGitHubCA(t, ns.Name)
	spec.APIURL, spec.CABundleRef = gh.URL()+"/", &fleetv1.SecretKeyReference{Name: "github-ca"}
	pool := builder.NewRunnerPool(name, ns.Name).WithGitHub(spec).Build()
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())
	return pool
}

func foreignKeyPEM(t *testing.T) string {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
}

// TestJobsGoOnlyToPoolsOfTheirInstallation: team A's job (a delivery signed by the App, naming
// team A's installation) never reaches team B's pool in another namespace, although B's pool
// matches the job better (a repository pool with the job's labels) — whatever B writes in its
// credentials Secret. A pool gets a job only if its credentials prove, to GitHub, that they hold
// the installation the delivery names.
func TestJobsGoOnlyToPoolsOfTheirInstallation(t *testing.T) {
	appID := fmt.Sprint(gh.AppID())
	tests := []struct {
		name        string
		credentials func(org string) map[string]string
	}{
		{name: "another installation of the App", credentials: func(org string) map[string]string {
			return map[string]string{"app-id": appID, "private-key": string(gh.AppKeyPEM()),
				"installation-id": fmt.Sprint(gh.InstallationID(org + "-b"))}
		}},
		{name: "team A's App and installation IDs typed in, with another key", credentials: func(org string) map[string]string {
			return map[string]string{"app-id": appID, "private-key": foreignKeyPEM(t),
				"installation-id": fmt.Sprint(gh.InstallationID(org))}
		}},
		{name: "team A's IDs typed in, no key", credentials: func(org string) map[string]string {
			return map[string]string{"app-id": appID, "installation-id": fmt.Sprint(gh.InstallationID(org))}
		}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			org := fmt.Sprintf("tenancy%d", i)
			h := startReceiverAllNamespaces(t)
			teamA := h.createPool(t, "linux", fleetv1.GitHubSpec{Organization: org, Labels: []string{"linux"}})
			teamB := otherTeam(t, "linux", fleetv1.GitHubSpec{Repository: org + "/api", Labels: []string{"linux"}}, tt.credentials(org))

			g.Expect(h.post(g, fakegithub.NewDeliveryID(), job{id: 700, action: "queued", repository: org + "/api"}.payload())).
				To(Equal(http.StatusAccepted))
			h.waitIdle(g)
			g.Expect(h.snapshot(g, teamA).Queued).To(Equal(1), "team A's pool holds the installation")
			err := env.Client.Get(context.Background(), demand.ConfigMapKey(teamB), &corev1.ConfigMap{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "team B's pool never sees the job")
		})
	}
}

// TestJobHasOneOwnerAcrossNamespaces: two teams hold the same installation, and both pools match
// a job. The job is counted once, by the pool that claimed it first — also when that was the
// other pool's repair loop, which the webhook then follows.
func TestJobHasOneOwnerAcrossNamespaces(t *testing.T) {
	for _, repairFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("repair first %v", repairFirst), func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			org := fmt.Sprintf("shared%v", repairFirst)
			h := startReceiverAllNamespaces(t)
			best := h.createPool(t, "linux", fleetv1.GitHubSpec{Repository: org + "/api", Labels: []string{"linux"}})
			other := otherTeam(t, "linux", fleetv1.GitHubSpec{Organization: org, Labels: []string{"linux"}},
				map[string]string{"app-id": fmt.Sprint(gh.AppID()), "private-key": string(gh.AppKeyPEM())})
			installation := gh.InstallationID(org)
			claims := h.config(webhook.Config{}).Claims
			want := best
			if repairFirst {
				// The other pool's repair loop found the job in the API before any webhook.
				owner, err := claims.Claim(ctx, fmt.Sprint(installation), "800", other)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(owner.Is(other)).To(BeTrue())
				want = other
			}
			for _, action := range []string{"queued", "in_progress"} {
				g.Expect(h.post(g, fakegithub.NewDeliveryID(), job{id: 800, action: action, repository: org + "/api", runner: "r1"}.payload())).
					To(Equal(http.StatusAccepted))
				h.waitIdle(g)
			}
			owner, err := claims.Claim(ctx, fmt.Sprint(installation), "800", best)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(owner.Is(want)).To(BeTrue(), "the first claim stands")
			g.Expect(h.snapshot(g, want).Busy).To(HaveKey("r1"))
			for _, p := range []*fleetv1.RunnerPool{best, other} {
				if p != want {
					err := env.Client.Get(ctx, demand.ConfigMapKey(p), &corev1.ConfigMap{})
					g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the job is in one ledger only")
				}
			}
		})
	}
}

// TestBogusCredentialsDoNotAmplifyDeliveries: a pool whose credentials GitHub refuses (another
// team's installation ID typed in with a key of no App) ranks first for a job. Its refusal is
// remembered, so every later delivery does not turn into another call to GitHub for it.
func TestBogusCredentialsDoNotAmplifyDeliveries(t *testing.T) {
	g := NewWithT(t)
	org := "amplify"
	h := startReceiverAllNamespaces(t)
	teamA := h.createPool(t, "linux", fleetv1.GitHubSpec{Organization: org, Labels: []string{"linux"}})
	otherTeam(t, "linux", fleetv1.GitHubSpec{Repository: org + "/api", Labels: []string{"linux"}},
		map[string]string{"app-id": fmt.Sprint(gh.AppID()), "private-key": foreignKeyPEM(t), "installation-id": fmt.Sprint(gh.InstallationID(org))})

	deliver := func(id int64) {
		g.Expect(h.post(g, fakegithub.NewDeliveryID(), job{id: id, action: "queued", repository: org + "/api"}.payload())).
			To(Equal(http.StatusAccepted))
		h.waitIdle(g)
	}
	deliver(900) // both pools prove (or fail to prove) their installation once
	tokenCalls := gh.Requests(fakegithub.EndpointAccessToken)
	for id := int64(901); id < 911; id++ {
		deliver(id)
	}
	g.Expect(gh.Requests(fakegithub.EndpointAccessToken)).To(Equal(tokenCalls), "no token request per delivery")
	g.Expect(h.snapshot(g, teamA).Queued).To(Equal(11))
}
