package service_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/bootstraptest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

func TestRunnerConfigIsIssuedOnceToItsOwnMachine(t *testing.T) {
	g := NewWithT(t)
	h := startService(t)
	a, b := h.machine(t, "vm-a", time.Minute), h.machine(t, "vm-b", time.Minute)
	svidA, status := h.attest(t, a.Token)
	g.Expect(status).To(Equal(http.StatusOK))
	svidB, status := h.attest(t, b.Token)
	g.Expect(status).To(Equal(http.StatusOK))

	status, rcA, err := h.runnerConfig(h.mtls(svidA))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(rcA.Platform).To(Equal("github"))
	g.Expect(rcA.RunnerName).To(Equal("vm-a"))
	jit, err := fakegithub.DecodeJITConfig(rcA.JITConfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(jit.RunnerName()).To(Equal("vm-a"), "VM A's config registers VM A's runner, never B's")
	g.Expect(jit.Scope()).To(Equal(h.fleet.Repo))
	var labels []string
	for _, r := range h.gh.Runners() {
		if r.ID == jit.RunnerID() {
			labels = r.Labels
		}
	}
	g.Expect(labels).To(ContainElements("linux", "hyperfleet", "self-hosted"))
	g.Expect(labels).To(ContainElement(HavePrefix("hyperfleet-pool-")), "the runner carries its pool's mark")

	cfgA := bootstraptest.Get(t, env.Client, a.Config)
	g.Expect(cfgA.Status.AttestedTime).NotTo(BeNil())
	sum := sha256.Sum256(svidA.Certificates[0].Raw)
	g.Expect(cfgA.Status.AttestedSVID).To(Equal(&bootstrapv1.AttestedSVID{
		SerialNumber: svidA.Certificates[0].SerialNumber.Text(16), SHA256: hex.EncodeToString(sum[:])}),
		"the job's record names the SVID the VM presented")
	g.Expect(conditions.IsTrue(cfgA, bootstrapv1.AttestedCondition)).To(BeTrue())
	g.Expect(bootstraptest.Get(t, env.Client, b.Config).Status.AttestedTime).To(BeNil(), "B is untouched by A's request")

	status, _, err = h.runnerConfig(h.mtls(svidA))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusConflict), "a replayed request is refused")

	status, rcB, err := h.runnerConfig(h.mtls(svidB))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(rcB.RunnerName).To(Equal("vm-b"))
	g.Expect(rcB.JITConfig).NotTo(Equal(rcA.JITConfig))

	names := []string{}
	for _, r := range h.gh.Runners() {
		names = append(names, r.Name)
	}
	g.Expect(names).To(ConsistOf("vm-a", "vm-b"), "one registration per VM")
}

func TestRunnerConfigRefusals(t *testing.T) {
	h := startService(t)

	t.Run("no SVID", func(t *testing.T) {
		g := NewWithT(t)
		status, _, err := h.runnerConfig(h.client)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusUnauthorized))
	})

	t.Run("SVID from another CA", func(t *testing.T) {
		g := NewWithT(t)
		m := h.machine(t, "forged", time.Minute)
		rogue, _, _, err := identity.NewCA(td, time.Hour)
		g.Expect(err).NotTo(HaveOccurred())
		// Same trust domain, same machine ID: only the signer differs.
		svid, err := rogue.IssueServerSVID(m.ID, nil, nil, time.Hour)
		g.Expect(err).NotTo(HaveOccurred())
		status, rc, err := h.runnerConfig(h.mtls(svid))
		g.Expect(err).To(HaveOccurred(), "the handshake refuses a certificate our CA did not sign")
		g.Expect(status).To(BeZero())
		g.Expect(rc).To(BeNil())
		g.Expect(h.gh.Runners()).To(BeEmpty())
	})

	t.Run("SVID that names no machine", func(t *testing.T) {
		g := NewWithT(t)
		svid, err := h.ca.IssueServerSVID(spiffeid.RequireFromPath(td, "/hyperfleet/bootstrap-service"), nil, nil, time.Hour)
		g.Expect(err).NotTo(HaveOccurred())
		_, _, err = h.runnerConfig(h.mtls(svid))
		g.Expect(err).To(HaveOccurred())
	})

	t.Run("SVID of a Machine that is gone", func(t *testing.T) {
		g := NewWithT(t)
		m := h.machine(t, "gone", time.Minute)
		svid, status := h.attest(t, m.Token)
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(env.Client.Delete(context.Background(), m.Machine)).To(Succeed())
		status, _, err := h.runnerConfig(h.mtls(svid))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusForbidden))
	})

	t.Run("SVID of a Machine whose claim is gone", func(t *testing.T) {
		g := NewWithT(t)
		m := h.machine(t, "claimless", time.Minute)
		svid, status := h.attest(t, m.Token)
		g.Expect(status).To(Equal(http.StatusOK))
		g.Expect(env.Client.Delete(context.Background(), m.Claim)).To(Succeed())
		status, _, err := h.runnerConfig(h.mtls(svid))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusForbidden))
	})

	t.Run("GitHub failure gives the claim back", func(t *testing.T) {
		g := NewWithT(t)
		m := h.machine(t, "retry", time.Minute)
		svid, status := h.attest(t, m.Token)
		g.Expect(status).To(Equal(http.StatusOK))
		h.gh.FailNext(fakegithub.EndpointRepoJITConfig, 1, http.StatusBadGateway)
		status, _, err := h.runnerConfig(h.mtls(svid))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(BeNumerically(">=", 500))
		g.Expect(bootstraptest.Get(t, env.Client, m.Config).Status.RunnerConfigTime).To(BeNil())
		status, rc, err := h.runnerConfig(h.mtls(svid))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK), "the VM's retry succeeds")
		g.Expect(rc.RunnerName).To(Equal("retry"))
	})

	t.Run("a rate-limited registration answers 503 with Retry-After and gives the claim back", func(t *testing.T) {
		g := NewWithT(t)
		m := h.machine(t, "throttled", time.Minute)
		svid, status := h.attest(t, m.Token)
		g.Expect(status).To(Equal(http.StatusOK))
		// GitHub's secondary rate limit on JIT configs: 429 with Retry-After.
		h.gh.InjectFault(fakegithub.EndpointRepoJITConfig, fakegithub.Fault{Times: 1, Status: http.StatusTooManyRequests, RetryAfter: 45 * time.Second})
		resp, err := h.mtls(svid).Get(h.url + protocol.RunnerConfigPath)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable))
		after, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		g.Expect(err).NotTo(HaveOccurred(), "Retry-After %q", resp.Header.Get("Retry-After"))
		g.Expect(after).To(BeNumerically("~", 45, 5))
		g.Expect(bootstraptest.Get(t, env.Client, m.Config).Status.RunnerConfigTime).To(BeNil())
	})

	t.Run("missing App credentials answer 503 and give the claim back", func(t *testing.T) {
		g := NewWithT(t)
		ctx := context.Background()
		m := h.machine(t, "nocreds", time.Minute)
		svid, status := h.attest(t, m.Token)
		g.Expect(status).To(Equal(http.StatusOK))
		key := client.ObjectKey{Namespace: m.Machine.Namespace, Name: "github-app"}
		secret := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, key, secret)).To(Succeed())
		g.Expect(env.Client.Delete(ctx, secret)).To(Succeed())
		status, _, err := h.runnerConfig(h.mtls(svid))
		g.Expect(err).NotTo(HaveOccurred())
		// 503, not 502: the agent waits out 503 while an operator restores the Secret.
		g.Expect(status).To(Equal(http.StatusServiceUnavailable))
		g.Expect(bootstraptest.Get(t, env.Client, m.Config).Status.RunnerConfigTime).To(BeNil())
		secret.ResourceVersion, secret.UID = "", ""
		g.Expect(env.Client.Create(ctx, secret)).To(Succeed())
		status, rc, err := h.runnerConfig(h.mtls(svid))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK), "the VM's retry succeeds once the Secret is back")
		g.Expect(rc.RunnerName).To(Equal("nocreds"))
	})

	t.Run("unknown endpoint", func(t *testing.T) {
		g := NewWithT(t)
		resp, err := h.client.Get(h.url + "/v1/secrets")
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
	})
}

func TestDeregisterRunnerThatNeverRan(t *testing.T) {
	g := NewWithT(t)
	h := startService(t)
	m := h.machine(t, "idle", time.Minute)
	svid, _ := h.attest(t, m.Token)
	status, _, err := h.runnerConfig(h.mtls(svid))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(h.gh.Runners()).To(HaveLen(1))
	req, _ := http.NewRequest(http.MethodDelete, h.url+protocol.RunnerPath, nil)
	resp, err := h.mtls(svid).Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusNoContent))
	g.Expect(h.gh.Runners()).To(BeEmpty())
}

// A runner its pool retired before it got its config never registers, even though its VM attested.
func TestRetiredRunnerGetsNoConfig(t *testing.T) {
	g := NewWithT(t)
	h := startService(t)
	m := h.machine(t, "vm-retired", time.Minute)
	svid, status := h.attest(t, m.Token)
	g.Expect(status).To(Equal(http.StatusOK))

	cfg := bootstraptest.Get(t, env.Client, m.Config)
	cfg.Annotations = map[string]string{bootstrapv1.RunnerRetiredAnnotation: "true"}
	g.Expect(env.Client.Update(context.Background(), cfg)).To(Succeed())

	status, _, err := h.runnerConfig(h.mtls(svid))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusForbidden))
	g.Expect(h.gh.Runners()).To(BeEmpty(), "no runner registered for a retired Machine")
	g.Expect(bootstraptest.Get(t, env.Client, m.Config).Status.RunnerConfigTime).To(BeNil())
}
