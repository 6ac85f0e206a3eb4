package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	_ "github.com/hyperfleet-io/hyperfleet/pkg/platform/all"
	"github.com/hyperfleet-io/hyperfleet/pkg/webhook"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

var env *testenv.Env

// gh is the GitHub App whose installations sign the deliveries and whose key the pools hold.
var gh *fakegithub.Server

var secret = []byte("It's a Secret to Everybody")

func TestMain(m *testing.M) {
	flag.Parse()
	if fuzzing() {
		os.Exit(m.Run()) // the fuzz target needs no API server; its workers start often
	}
	testenv.ExitIfShort("an API server")
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if gh, err = fakegithub.New(fakegithub.Options{TLS: true}); err == nil {
		err = gh.Start("127.0.0.1:0")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = env.Stop()
		os.Exit(1)
	}
	code := m.Run()
	gh.Close()
	_ = env.Stop()
	os.Exit(code)
}

// fuzzing reports whether this process explores a fuzz target (go test -fuzz, or one of its
// workers) rather than running tests and seed corpora.
func fuzzing() bool {
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		return true
	}
	f := flag.Lookup("test.fuzzworker")
	return f != nil && f.Value.String() == "true"
}

// harness is a receiver served on 127.0.0.1 whose routing sees only its own namespace.
type harness struct {
	ns       string
	url      string
	receiver *webhook.Receiver
	store    *demand.Store
	client   *http.Client

	mu       sync.Mutex
	notified map[types.NamespacedName]int
}

func startReceiver(t *testing.T, cfg webhook.Config, startWorkers bool) *harness {
	t.Helper()
	return startReceiverIn(t, cfg, startWorkers, false)
}

// startReceiverAllNamespaces starts a receiver that routes to pools in every namespace, as the
// manager does.
func startReceiverAllNamespaces(t *testing.T) *harness {
	t.Helper()
	return startReceiverIn(t, webhook.Config{}, true, true)
}

func startReceiverIn(t *testing.T, cfg webhook.Config, startWorkers, allNamespaces bool) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "webhook-"}}
	NewWithT(t).Expect(env.Client.Create(ctx, ns)).To(Succeed())
	h := &harness{ns: ns.Name, store: demand.NewStore(env.Client), notified: map[types.NamespacedName]int{},
		client: &http.Client{Timeout: 10 * time.Second}}
	NewWithT(t).Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github-app", Namespace: ns.Name},
		StringData: map[string]string{"app-id": fmt.Sprint(gh.AppID()), "private-key": string(gh.AppKeyPEM())}})).To(Succeed())
	createGitHubCA(t, ns.Name)
	cfg = h.config(cfg)
	if allNamespaces {
		cfg.Namespace = metav1.NamespaceAll
	}
	h.receiver = webhook.NewReceiver(env.Client, h.store, cfg, func(pool types.NamespacedName) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.notified[pool]++
	})
	srv := httptest.NewServer(h.receiver)
	h.url = srv.URL + webhook.Path
	done := make(chan struct{})
	if startWorkers {
		go func() { defer close(done); _ = h.receiver.Start(ctx) }()
	} else {
		close(done)
	}
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return h
}

// config completes cfg for a receiver routing to the harness's namespace: its secret, the pools'
// App installations proven against the fake GitHub, and job claims kept in the namespace.
func (h *harness) config(cfg webhook.Config) webhook.Config {
	if cfg.Secrets == nil {
		cfg.Secrets = map[platform.Kind][]byte{platform.KindGitHub: secret}
	}
	if cfg.Namespace == "" {
		cfg.Namespace = h.ns
	}
	if cfg.Installations == nil {
		src, err := platform.NewSource(platform.Inputs{Reader: env.Client})
		if err != nil {
			panic(err)
		}
		cfg.Installations = src
	}
	if cfg.Claims == nil {
		cfg.Claims = &demand.Claims{Client: env.Client, Namespace: h.ns}
	}
	return cfg
}

func (h *harness) startWorkers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = h.receiver.Start(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func (h *harness) notifications(pool *fleetv1.RunnerPool) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.notified[types.NamespacedName{Namespace: pool.Namespace, Name: pool.Name}]
}

// createPool creates a RunnerPool in the harness's namespace.
func (h *harness) createPool(t *testing.T, name string, spec fleetv1.GitHubSpec) *fleetv1.RunnerPool {
	t.Helper()
	spec.CredentialsRef = fleetv1.LocalObjectReference{Name: "github-app"}
	spec.APIURL, spec.CABundleRef = gh.URL()+"/", &fleetv1.SecretKeyReference{Name: "github-ca"}
	pool := builder.NewRunnerPool(name, h.ns).WithGitHub(spec).Build()
	NewWithT(t).Expect(env.Client.Create(context.Background(), pool)).To(Succeed())
	return pool
}

func (h *harness) snapshot(g Gomega, pool *fleetv1.RunnerPool) demand.Demand {
	d, err := h.store.Snapshot(context.Background(), pool)
	g.Expect(err).NotTo(HaveOccurred())
	return d
}

// waitIdle waits until every accepted delivery has been handled by a worker.
func (h *harness) waitIdle(g Gomega) {
	g.Eventually(func() uint64 {
		s := h.receiver.Stats()
		return s.Accepted - (s.Recorded + s.Unchanged + s.Unrouted + s.Failed)
	}).WithTimeout(20 * time.Second).WithPolling(20 * time.Millisecond).Should(BeZero())
}

// job describes a workflow_job delivery.
type job struct {
	id         int64
	action     string
	repository string // owner/name
	userOwned  bool   // owned by a user: GitHub then sends no organization
	labels     []string
	runner     string
	// installation sent the delivery; default the fake App's installation on the owner.
	installation int64
}

// payload renders j as GitHub sends it.
func (j job) payload() []byte {
	if j.repository == "" {
		j.repository = "acme/api"
	}
	if j.labels == nil {
		j.labels = []string{"self-hosted", "linux"}
	}
	owner, name, _ := bytes.Cut([]byte(j.repository), []byte("/"))
	if j.installation == 0 {
		j.installation = gh.InstallationID(string(owner))
	}
	wj := map[string]any{
		"id": j.id, "run_id": j.id * 10, "run_attempt": 1, "status": j.action, "conclusion": nil,
		"name": "build", "workflow_name": "CI", "head_branch": "main", "labels": j.labels,
		"runner_id": nil, "runner_name": nil, "runner_group_id": nil, "runner_group_name": nil,
		"created_at": "2026-01-02T03:04:05Z", "started_at": "2026-01-02T03:04:05Z",
		"url": fmt.Sprintf("https://api.github.com/repos/%s/actions/jobs/%d", j.repository, j.id),
	}
	if j.runner != "" {
		wj["runner_id"], wj["runner_name"], wj["runner_group_id"], wj["runner_group_name"] = 7, j.runner, 1, "Default"
	}
	if j.action == "completed" {
		wj["conclusion"], wj["completed_at"] = "success", "2026-01-02T03:05:05Z"
	}
	p := map[string]any{
		"action": j.action, "workflow_job": wj,
		"repository": map[string]any{"id": 1, "name": string(name), "full_name": j.repository,
			"private": true, "owner": map[string]any{"login": string(owner), "type": "Organization"}},
		"sender":       map[string]any{"login": "octocat", "type": "User"},
		"installation": map[string]any{"id": j.installation},
	}
	if !j.userOwned {
		p["organization"] = map[string]any{"login": string(owner)}
	}
	b, _ := json.Marshal(p)
	return b
}

// post delivers a signed workflow_job event like GitHub does and returns the status code.
func (h *harness) post(g Gomega, deliveryID string, body []byte) int {
	status, err := fakegithub.PostWebhook(context.Background(), h.client, h.url, secret, "workflow_job", deliveryID, body)
	g.Expect(err).NotTo(HaveOccurred())
	return status
}

// createGitHubCA stores the fake GitHub's CA certificate as Secret github-ca in ns.
func createGitHubCA(t *testing.T, ns string) {
	t.Helper()
	NewWithT(t).Expect(env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github-ca", Namespace: ns},
		Data: map[string][]byte{"ca.crt": gh.CACertPEM()}})).To(Succeed())
}
