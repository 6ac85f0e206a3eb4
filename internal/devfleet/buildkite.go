package devfleet

import (
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
)

// PlatformBuildkite makes the sample pool a Buildkite pool of the fake Buildkite's cluster queue,
// with a buildkite-agent stand-in in each VM.
const PlatformBuildkite = "buildkite"

// Names of the Buildkite sample's objects and its fake Buildkite's contents.
const (
	// BuildkiteSecretName holds the API token; BuildkiteCASecretName the fake's CA.
	BuildkiteSecretName   = "buildkite-api"
	BuildkiteCASecretName = "buildkite-ca"
	// DefaultQueue is the Buildkite pool's queue; DefaultPipeline where make jobs builds.
	DefaultQueue    = "linux"
	DefaultPipeline = "app"
)

// BuildkiteScopes are the scopes of the sample pool's API token: the least privilege
// docs/platforms.md documents.
var BuildkiteScopes = []string{fakebuildkite.ScopeReadClusters, fakebuildkite.ScopeWriteClusters, fakebuildkite.ScopeReadBuilds}

// DefaultBuildkiteTags are the Buildkite pool's agent tags besides its queue.
var DefaultBuildkiteTags = []string{"os=linux", "arch=x64"}

// BuildkiteState is the fake Buildkite, when the sample pool is a Buildkite pool.
type BuildkiteState struct {
	// URL is the REST API root; AgentEndpoint the agent API VMs register with.
	URL           string `json:"url"`
	AgentEndpoint string `json:"agentEndpoint"`
	Organization  string `json:"organization"`
	Cluster       string `json:"cluster"`
	Queue         string `json:"queue"`
	// Pipeline is where make jobs creates builds.
	Pipeline string `json:"pipeline"`
	// WebhookURL is where the fake sends signed job events (the receiver's /webhooks/buildkite).
	WebhookURL string `json:"webhookURL"`
	// JobsURL lists jobs (GET) and creates one (POST {"pipeline","agent_query_rules","name"}).
	JobsURL string `json:"jobsURL"`
	// AgentsURL lists every agent that registered.
	AgentsURL string `json:"agentsURL"`
	// CAFile is the certificate the fake's HTTPS is signed with; the pool trusts it through
	// spec.platform.buildkite.caBundleRef and hands it to each VM's agent.
	CAFile string `json:"caFile"`
}

// buildkiteDefaults gives a Buildkite pool its queue and, unless key=value tags were given,
// the default agent tags.
func (p *PoolOptions) buildkiteDefaults() {
	if p.Queue == "" {
		p.Queue = DefaultQueue
	}
	if !strings.Contains(strings.Join(p.Labels, ","), "=") {
		p.Labels = DefaultBuildkiteTags
	}
}

// startBuildkite starts the fake Buildkite over HTTPS and returns an API token of least privilege.
func (f *Fleet) startBuildkite() (token string, err error) {
	log, err := f.fileLogger("fake-buildkite.log")
	if err != nil {
		return "", err
	}
	f.Buildkite = fakebuildkite.New(fakebuildkite.Options{Organization: DefaultOrganization, TLS: true, Logger: log})
	if err := f.Buildkite.Start("127.0.0.1:0"); err != nil {
		return "", err
	}
	caFile := filepath.Join(f.stateDir, "buildkite-ca.crt")
	if err := os.WriteFile(caFile, f.Buildkite.CACertPEM(), 0o600); err != nil {
		return "", err
	}
	url := f.Buildkite.URL()
	f.State.Buildkite = &BuildkiteState{URL: url, AgentEndpoint: f.Buildkite.AgentEndpoint(), Organization: f.Buildkite.Organization(),
		Cluster: f.Buildkite.ClusterID(), Queue: f.opts.Pool.Queue, Pipeline: DefaultPipeline,
		JobsURL: url + "/_fake/jobs", AgentsURL: url + "/_fake/agents", CAFile: caFile}
	return f.Buildkite.AddAPIToken(BuildkiteScopes...), nil
}

// buildkiteCA is the fake Buildkite's certificate, nil without one.
func (f *Fleet) buildkiteCA() []byte {
	if f.Buildkite == nil {
		return nil
	}
	return f.Buildkite.CACertPEM()
}

// buildkitePlatform is a Buildkite pool's spec.platform.
func buildkitePlatform(bk *BuildkiteState, tags []string) fleetv1.PlatformSpec {
	return fleetv1.PlatformSpec{Buildkite: &fleetv1.BuildkiteSpec{
		Organization: bk.Organization, Cluster: bk.Cluster, Queue: bk.Queue, Tags: tags,
		CredentialsRef: fleetv1.LocalObjectReference{Name: BuildkiteSecretName},
		APIURL:         bk.URL + "/", AgentEndpoint: bk.AgentEndpoint,
		// HTTPS on 127.0.0.1 with the fake's own CA, as a private Buildkite endpoint would be.
		CABundleRef: &fleetv1.SecretKeyReference{Name: BuildkiteCASecretName, Key: "ca.crt"},
	}}
}

// buildkiteSecrets are a Buildkite pool's Secrets: its API token and the fake's CA.
func buildkiteSecrets(meta func(string) metav1.ObjectMeta, token string, caPEM []byte) []client.Object {
	return []client.Object{
		&corev1.Secret{ObjectMeta: meta(BuildkiteSecretName), StringData: map[string]string{"token": token}},
		&corev1.Secret{ObjectMeta: meta(BuildkiteCASecretName), Data: map[string][]byte{"ca.crt": caPEM}},
	}
}
