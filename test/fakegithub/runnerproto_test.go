package fakegithub_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

func TestRunnerAcquiresOnlyMatchingJobsInItsScope(t *testing.T) {
	tests := []struct {
		name      string
		scope     string
		labels    []string
		jobRepo   string
		jobLabels []string
		acquires  bool
	}{
		{name: "labels match ignoring case", scope: "acme/api", labels: []string{"self-hosted", "linux", "x64"}, jobRepo: "acme/api", jobLabels: []string{"Self-Hosted", "LINUX"}, acquires: true},
		{name: "job needs a label the runner lacks", scope: "acme/api", labels: []string{"self-hosted", "linux"}, jobRepo: "acme/api", jobLabels: []string{"linux", "gpu"}},
		{name: "repository runner, other repository", scope: "acme/api", labels: []string{"linux"}, jobRepo: "acme/web", jobLabels: []string{"linux"}},
		{name: "organization runner, any repository of the org", scope: "acme", labels: []string{"linux"}, jobRepo: "acme/web", jobLabels: []string{"linux"}, acquires: true},
		{name: "organization runner, other organization", scope: "acme", labels: []string{"linux"}, jobRepo: "globex/web", jobLabels: []string{"linux"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			fake := fakegithub.StartForTest(t, fakegithub.Options{})
			job := fake.CreateJob(tt.jobRepo, tt.jobLabels)
			runner, err := fakegithub.NewRunnerClient(registerRunner(t, fake, installationToken(t, fake, "acme"), tt.scope, "r1", tt.labels...), nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(runner.Online(ctx)).To(Succeed())

			id, err := runner.Acquire(ctx)

			if !tt.acquires {
				g.Expect(err).To(MatchError(fakegithub.ErrNoJob))
				got, _ := fake.Job(job.ID)
				g.Expect(got.Status).To(Equal(fakegithub.JobQueued))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(id).To(Equal(job.ID))
			got, _ := fake.Job(job.ID)
			g.Expect(got).To(And(HaveField("Status", fakegithub.JobInProgress), HaveField("RunnerName", "r1"), HaveField("Acquisitions", 1)))
		})
	}
}

func TestRunnerProtocolRules(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fake := fakegithub.StartForTest(t, fakegithub.Options{})
	token := installationToken(t, fake, "acme")
	first := fake.CreateJob("acme/api", []string{"linux"})
	second := fake.CreateJob("acme/api", []string{"linux"})
	encoded := registerRunner(t, fake, token, "acme/api", "r1", "linux")
	runner, err := fakegithub.NewRunnerClient(encoded, nil)
	g.Expect(err).NotTo(HaveOccurred())

	_, err = runner.Acquire(ctx)
	g.Expect(err).To(MatchError(ContainSubstring("offline")), "must come online first")
	g.Expect(runner.Online(ctx)).To(Succeed())
	id, err := runner.Acquire(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id).To(Equal(first.ID), "oldest job first")
	_, err = runner.Acquire(ctx)
	g.Expect(err).To(MatchError(ContainSubstring("409")), "a JIT runner runs one job")
	g.Expect(runner.Offline(ctx)).To(MatchError(ContainSubstring("409")), "busy runners cannot leave")

	// A config whose key is not the one GitHub issued for the runner cannot get its token.
	cfg, _ := fakegithub.DecodeJITConfig(encoded)
	cfg.Key, err = rsa.GenerateKey(rand.Reader, 2048)
	g.Expect(err).NotTo(HaveOccurred())
	forgedConfig, err := fakegithub.EncodeJITConfig(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	forged, _ := fakegithub.NewRunnerClient(forgedConfig, nil)
	g.Expect(forged.Online(ctx)).To(MatchError(And(ContainSubstring("401"), ContainSubstring("invalid_client"))))

	g.Expect(runner.Complete(ctx, second.ID, "success")).To(MatchError(ContainSubstring("409")), "not its job")
	g.Expect(runner.Complete(ctx, first.ID, "failure")).To(Succeed())
	g.Expect(runner.Online(ctx)).To(MatchError(ContainSubstring("401")), "ephemeral runner deleted after its job: its token is gone with it")

	done, _ := fake.Job(first.ID)
	g.Expect(done).To(And(HaveField("Status", fakegithub.JobCompleted), HaveField("Conclusion", "failure"), HaveField("Acquisitions", 1)))
	g.Expect(fake.Runners()).To(BeEmpty())
	g.Expect(fake.VerifyEachJobRanOnce()).To(MatchError(ContainSubstring("acquired 0 times")), "the second job never ran")
	g.Expect(fake.CancelJob(second.ID)).To(Succeed())
	g.Expect(fake.VerifyEachJobRanOnce()).To(Succeed(), "cancelled jobs are exempt")
}

// TestRunnerTokenExchangeIsActionsRunners: a runner gets its access token as actions/runner does,
// with a client assertion signed by the key of its own JIT config; each wrong form of the
// exchange is refused with OAuth's error codes, and one runner's key cannot get another's token.
func TestRunnerTokenExchangeIsActionsRunners(t *testing.T) {
	fake := fakegithub.StartForTest(t, fakegithub.Options{})
	token := installationToken(t, fake, "acme")
	mine, err := fakegithub.DecodeJITConfig(registerRunner(t, fake, token, "acme/api", "mine", "linux"))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := fakegithub.DecodeJITConfig(registerRunner(t, fake, token, "acme/api", "theirs", "linux"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sign := func(cfg fakegithub.JITConfig, mutate func(*jwt.RegisteredClaims)) string {
		id := cfg.Credentials.Data["clientId"]
		c := jwt.RegisteredClaims{Issuer: id, Subject: id, Audience: jwt.ClaimStrings{cfg.Credentials.Data["authorizationUrl"]},
			IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute))}
		if mutate != nil {
			mutate(&c)
		}
		s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, c).SignedString(cfg.Key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good, err := mine.ClientAssertion(now)
	if err != nil {
		t.Fatal(err)
	}
	const jwtBearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
	tests := []struct {
		name        string
		url         string
		grant, kind string
		assertion   string
		status      int
		error       string
	}{
		{name: "the runner's own assertion", url: mine.Credentials.Data["authorizationUrl"], grant: "client_credentials", kind: jwtBearer, assertion: good, status: http.StatusOK},
		{name: "another grant type", url: mine.Credentials.Data["authorizationUrl"], grant: "password", kind: jwtBearer, assertion: good, status: http.StatusBadRequest, error: "unsupported_grant_type"},
		{name: "another assertion type", url: mine.Credentials.Data["authorizationUrl"], grant: "client_credentials", kind: "urn:x:saml", assertion: good, status: http.StatusBadRequest, error: "invalid_request"},
		{name: "one runner's key for another's client ID", url: theirs.Credentials.Data["authorizationUrl"], grant: "client_credentials", kind: jwtBearer,
			assertion: sign(mine, func(c *jwt.RegisteredClaims) {
				id := theirs.Credentials.Data["clientId"]
				c.Issuer, c.Subject, c.Audience = id, id, jwt.ClaimStrings{theirs.Credentials.Data["authorizationUrl"]}
			}), status: http.StatusUnauthorized, error: "invalid_client"},
		{name: "its own assertion at another runner's endpoint", url: theirs.Credentials.Data["authorizationUrl"], grant: "client_credentials", kind: jwtBearer, assertion: good, status: http.StatusUnauthorized, error: "invalid_client"},
		{name: "another audience", url: mine.Credentials.Data["authorizationUrl"], grant: "client_credentials", kind: jwtBearer,
			assertion: sign(mine, func(c *jwt.RegisteredClaims) { c.Audience = jwt.ClaimStrings{"https://elsewhere.example/token"} }), status: http.StatusUnauthorized, error: "invalid_client"},
		{name: "expired", url: mine.Credentials.Data["authorizationUrl"], grant: "client_credentials", kind: jwtBearer,
			assertion: sign(mine, func(c *jwt.RegisteredClaims) { c.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Minute)) }), status: http.StatusUnauthorized, error: "invalid_client"},
		{name: "unsigned", url: mine.Credentials.Data["authorizationUrl"], grant: "client_credentials", kind: jwtBearer,
			assertion: strings.Join(strings.Split(good, ".")[:2], ".") + ".", status: http.StatusUnauthorized, error: "invalid_client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			form := url.Values{"grant_type": {tt.grant}, "client_assertion_type": {tt.kind}, "client_assertion": {tt.assertion}}
			resp, err := http.PostForm(tt.url, form)
			g.Expect(err).NotTo(HaveOccurred())
			defer resp.Body.Close()
			var body map[string]any
			g.Expect(json.NewDecoder(resp.Body).Decode(&body)).To(Succeed())
			g.Expect(resp.StatusCode).To(Equal(tt.status), "%v", body)
			if tt.error != "" {
				g.Expect(body).To(HaveKeyWithValue("error", tt.error))
				return
			}
			g.Expect(body).To(And(HaveKeyWithValue("access_token", Not(BeEmpty())), HaveKeyWithValue("expires_in", BeNumerically(">", 0))))
		})
	}
}

func TestManyRunnersRaceForJobsEachRunsOnce(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fake := fakegithub.StartForTest(t, fakegithub.Options{})
	token := installationToken(t, fake, "acme")
	const n = 20
	for range n {
		fake.CreateJob("acme/api", []string{"linux"})
	}
	var wg sync.WaitGroup
	for i := range n {
		runner, err := fakegithub.NewRunnerClient(registerRunner(t, fake, token, "acme", "r"+string(rune('a'+i)), "linux"), nil)
		g.Expect(err).NotTo(HaveOccurred())
		wg.Go(func() { _, _ = runner.RunOnce(ctx, 5*time.Millisecond) })
	}
	wg.Wait()

	g.Expect(fake.VerifyEachJobRanOnce()).To(Succeed())
	g.Expect(fake.Runners()).To(BeEmpty())
}

// hookReceiver verifies signatures independently of the fake and records deliveries.
type hookReceiver struct {
	secret []byte
	mu     sync.Mutex
	got    []string // "action job-id"
	bad    int
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	mac := hmac.New(sha256.New, h.secret)
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	var ev struct {
		Action      string `json:"action"`
		WorkflowJob struct {
			ID     int64  `json:"id"`
			Status string `json:"status"`
		} `json:"workflow_job"`
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Header.Get("X-Hub-Signature-256") != want || r.Header.Get("X-GitHub-Event") != "workflow_job" ||
		r.Header.Get("X-GitHub-Delivery") == "" || json.Unmarshal(body, &ev) != nil || ev.Action != ev.WorkflowJob.Status {
		h.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	h.got = append(h.got, ev.Action)
}

func (h *hookReceiver) actions() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.Join(h.got, ",")
}

func TestWebhooksAreSignedAndOrdered(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	recv := &hookReceiver{secret: []byte("s3cret")}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	fake := fakegithub.StartForTest(t, fakegithub.Options{})
	fake.CreateJob("acme/api", []string{"linux"}) // before SetWebhook: not delivered
	fake.SetWebhook(srv.URL, "s3cret")
	job := fake.CreateJob("acme/api", []string{"linux"}, fakegithub.InRun(1))
	fake.CreateJob("acme/api", []string{"gpu"}, fakegithub.WithoutQueuedWebhook())
	runner, _ := fakegithub.NewRunnerClient(registerRunner(t, fake, installationToken(t, fake, "acme"), "acme/api", "r1", "linux"), nil)
	g.Expect(runner.Online(ctx)).To(Succeed())
	// The runner takes the oldest job, created before the webhook was set.
	_, err := runner.RunOnce(ctx, time.Millisecond)
	g.Expect(err).NotTo(HaveOccurred())

	g.Eventually(fake.Deliveries).WithTimeout(5 * time.Second).Should(HaveLen(3))
	g.Expect(recv.actions()).To(Equal("queued,in_progress,completed"))
	g.Expect(recv.bad).To(Equal(0))
	deliveries := fake.Deliveries()
	g.Expect(deliveries[0]).To(And(HaveField("JobID", job.ID), HaveField("Action", "queued"), HaveField("StatusCode", http.StatusOK)))
	g.Expect(deliveries[0].ID).NotTo(Equal(deliveries[1].ID))
	g.Expect(deliveries[1].JobID).NotTo(Equal(job.ID), "in_progress is for the older job")
}

func TestSignPayload(t *testing.T) {
	// The example from GitHub's "Validating webhook deliveries" documentation.
	NewWithT(t).Expect(fakegithub.SignPayload([]byte("It's a Secret to Everybody"), []byte("Hello, World!"))).
		To(Equal("sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"))
}
