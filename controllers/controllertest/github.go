package controllertest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/bradleyfalzon/ghinstallation/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// MintInstallationToken gets an App installation token from the fake, as the manager would.
func MintInstallationToken(t *testing.T, gh *fakegithub.Server, repo string) string {
	t.Helper()
	tr, err := ghinstallation.New(gh.HTTPClient().Transport, gh.AppID(), gh.InstallationID(repo), gh.AppKeyPEM())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	tr.BaseURL = gh.URL()
	token, err := tr.Token(context.Background())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(token).To(HavePrefix("ghs_"))
	return token
}

// GitHubPool creates a fleet on sim and a RunnerPool for org's jobs labelled linux, registered
// through gh's App.
func GitHubPool(t *testing.T, ns, org string, max int32, sim *pvesim.Simulator, gh *fakegithub.Server) *fleetv1.RunnerPool {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	CAPIFleet(t, ns, sim)
	RunnerTemplates(t, ns)
	// Small VMs: linked clones all land on the template's node, whose memory is finite.
	mct := Get(g, &infrav1.MachineClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "runner", Namespace: ns}})
	small := client.MergeFrom(mct.DeepCopy()) // the template controller writes its status meanwhile
	mct.Spec.Template.Spec.MemoryMiB = 512
	g.Expect(Env.Client.Patch(ctx, mct, small)).To(Succeed())
	gh.InstallationID(org)
	g.Expect(Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github-app", Namespace: ns},
		StringData: map[string]string{"app-id": fmt.Sprint(gh.AppID()), "private-key": string(gh.AppKeyPEM())}})).To(Succeed())
	pool := builder.NewRunnerPool("linux", ns).WithCluster("fleet").WithBounds(0, max).
		WithGitHub(fleetv1.GitHubSpec{Organization: org, Labels: []string{"linux"}, APIURL: gh.URL() + "/",
			CABundleRef:    GitHubCA(t, ns, gh),
			CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"}}).
		WithTemplates("runner", "runner").Build()
	g.Expect(Env.Client.Create(ctx, pool)).To(Succeed())
	return pool
}

// RegisterJITRunner registers a just-in-time runner named name in org, as the bootstrap service
// does, and returns its encoded JIT config.
func RegisterJITRunner(t *testing.T, gh *fakegithub.Server, org, name string) string {
	t.Helper()
	g := NewWithT(t)
	body, _ := json.Marshal(map[string]any{"name": name, "runner_group_id": 1, "labels": []string{"self-hosted", "linux"}})
	req, err := http.NewRequest(http.MethodPost, gh.URL()+"/orgs/"+org+"/actions/runners/generate-jitconfig", bytes.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "token "+MintInstallationToken(t, gh, org))
	resp, err := gh.HTTPClient().Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusCreated))
	var out struct {
		EncodedJITConfig string `json:"encoded_jit_config"`
	}
	g.Expect(json.NewDecoder(resp.Body).Decode(&out)).To(Succeed())
	return out.EncodedJITConfig
}

// GitHubCA stores the fake GitHub's CA certificate in a Secret of ns and returns the reference a
// pool's caBundleRef takes.
func GitHubCA(t *testing.T, ns string, gh *fakegithub.Server) *fleetv1.SecretKeyReference {
	t.Helper()
	NewWithT(t).Expect(Env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github-ca", Namespace: ns},
		Data: map[string][]byte{"ca.crt": gh.CACertPEM()}})).To(Succeed())
	return &fleetv1.SecretKeyReference{Name: "github-ca"}
}
