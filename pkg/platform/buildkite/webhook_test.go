package buildkite_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/buildkite"
	"github.com/hyperfleet-io/hyperfleet/test/fakebuildkite"
)

const hookToken = "webhook-token-1234"

func readPayload(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func signedHeader(event string, body []byte, at time.Time) http.Header {
	h := http.Header{}
	h.Set(buildkite.HeaderEvent, event)
	h.Set(buildkite.HeaderSignature, fakebuildkite.Sign(hookToken, at, body))
	return h
}

// TestJobStatesFromRealPayloads: Buildkite's own payload shapes map deliberately: only a
// scheduled command job is demand; a job held by a concurrency group is not, even when the
// delivery says job.scheduled; block and trigger jobs never need an agent.
func TestJobStatesFromRealPayloads(t *testing.T) {
	tests := []struct {
		file, event string
		kind        buildkite.Kind
		phase       buildkite.Phase
		state       string
	}{
		{"job_scheduled.json", "job.scheduled", buildkite.KindJob, buildkite.PhaseDemand, "scheduled"},
		{"job_started.json", "job.started", buildkite.KindJob, buildkite.PhaseInProgress, "running"},
		{"job_finished.json", "job.finished", buildkite.KindJob, buildkite.PhaseCompleted, "finished"},
		{"job_finished_canceled.json", "job.finished", buildkite.KindJob, buildkite.PhaseCompleted, "canceled"},
		{"job_finished_expired.json", "job.finished", buildkite.KindJob, buildkite.PhaseCompleted, "expired"},
		{"job_scheduled_then_limited.json", "job.scheduled", buildkite.KindJob, buildkite.PhaseHeld, "limited"},
		{"job_activated_block.json", "job.activated", buildkite.KindIgnored, "", ""},
		{"job_scheduled_trigger.json", "job.scheduled", buildkite.KindIgnored, "", ""},
		{"ping.json", "ping", buildkite.KindPing, "", ""},
	}
	now := time.Now()
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			g := NewWithT(t)
			body := readPayload(t, tt.file)
			d, err := buildkite.ParseDelivery(signedHeader(tt.event, body, now), body, []byte(hookToken), now)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(d.Kind).To(Equal(tt.kind))
			if tt.kind != buildkite.KindJob {
				g.Expect(d.Job).To(BeNil())
				return
			}
			g.Expect(d.Job.Phase).To(Equal(tt.phase))
			g.Expect(d.Job.State).To(Equal(tt.state))
			g.Expect(d.Job.JobID).To(Equal("0190a5c4-8e30-4c74-9d31-6b5e2e5f4c33"))
			g.Expect(d.Job.Rules).To(Equal([]string{"queue=linux", "os=linux"}))
			g.Expect(d.Job.Queue()).To(Equal("linux"))
			g.Expect(d.Job.Organization).To(Equal("acme"))
			g.Expect(d.Job.Pipeline).To(Equal("api"))
			g.Expect(d.Job.BuildNumber).To(Equal(1042))
			g.Expect(d.Job.CreatedAt).To(Equal(time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)))
			g.Expect(d.Job.DeliveryID).NotTo(BeEmpty())
		})
	}
	t.Run("job.started names the agent", func(t *testing.T) {
		g := NewWithT(t)
		body := readPayload(t, "job_started.json")
		d, err := buildkite.ParseDelivery(signedHeader("job.started", body, now), body, []byte(hookToken), now)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Job.AgentName).To(Equal("hf-linux-7x2kq"))
		g.Expect(d.Job.StartedAt).To(Equal(time.Date(2026, 11, 24, 8, 0, 31, 0, time.UTC)))
	})
}

// TestEveryDocumentedStateIsMapped: each state Buildkite documents has a phase, held states
// are never demand, and an undocumented state maps to nothing.
func TestEveryDocumentedStateIsMapped(t *testing.T) {
	g := NewWithT(t)
	for _, s := range []string{"pending", "waiting", "waiting_failed", "blocked", "blocked_failed", "unblocked", "unblocked_failed",
		"limiting", "limited", "platform_limiting", "platform_limited", "scheduled", "assigned", "accepted", "running",
		"finished", "canceling", "canceled", "timing_out", "timed_out", "skipped", "broken", "expired"} {
		p, ok := buildkite.PhaseOf(s)
		g.Expect(ok).To(BeTrue(), s)
		g.Expect(p == buildkite.PhaseDemand).To(Equal(s == "scheduled"), s)
	}
	for _, s := range []string{"waiting", "blocked", "limited", "pending"} {
		p, _ := buildkite.PhaseOf(s)
		g.Expect(p).To(Equal(buildkite.PhaseHeld), s)
	}
	_, ok := buildkite.PhaseOf("teleported")
	g.Expect(ok).To(BeFalse())
}

// TestForgedAndReplayedWebhooksAreRefused plays the attacker: a wrong token, a body altered
// after signing, a signature made with another key, a genuine delivery replayed after the
// window, one dated in the future, garbage headers and no credentials at all.
func TestForgedAndReplayedWebhooksAreRefused(t *testing.T) {
	body := readPayload(t, "job_scheduled.json")
	now := time.Now()
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-3] = ' '
	withToken := func(tok string) http.Header {
		h := http.Header{}
		h.Set(buildkite.HeaderEvent, "job.scheduled")
		h.Set(buildkite.HeaderToken, tok)
		return h
	}
	raw := func(sig string) http.Header {
		h := http.Header{}
		h.Set(buildkite.HeaderEvent, "job.scheduled")
		h.Set(buildkite.HeaderSignature, sig)
		return h
	}
	otherKey := raw(fakebuildkite.Sign("someone-elses-token", now, body))
	bothWrongSig := raw(fakebuildkite.Sign("someone-elses-token", now, body))
	bothWrongSig.Set(buildkite.HeaderToken, hookToken)
	tests := []struct {
		name   string
		header http.Header
		body   []byte
		token  string
	}{
		{"wrong token", withToken("webhook-token-1235"), body, hookToken},
		{"token prefix", withToken("webhook-token"), body, hookToken},
		{"no credentials", http.Header{buildkite.HeaderEvent: {"job.scheduled"}}, body, hookToken},
		{"receiver without a token", withToken(""), body, ""},
		{"body changed after signing", signedHeader("job.scheduled", body, now), tampered, hookToken},
		{"signed with another key", otherKey, body, hookToken},
		{"bad signature beside a good token", bothWrongSig, body, hookToken},
		{"replayed after the window", signedHeader("job.scheduled", body, now.Add(-buildkite.MaxSignatureAge-time.Minute)), body, hookToken},
		{"dated in the future", signedHeader("job.scheduled", body, now.Add(buildkite.MaxSignatureAge+time.Minute)), body, hookToken},
		{"no timestamp", raw("signature=00"), body, hookToken},
		{"no equals signs", raw("timestamp,signature"), body, hookToken},
		{"duplicate fields", raw("timestamp=1,timestamp=2,signature=00"), body, hookToken},
		{"short signature", raw("timestamp=" + "1700000000" + ",signature=abcd"), body, hookToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			d, err := buildkite.ParseDelivery(tt.header, tt.body, []byte(tt.token), now)
			g.Expect(err).To(MatchError(platform.ErrInvalidSignature))
			g.Expect(platform.WebhookHTTPStatus(err)).To(Equal(http.StatusUnauthorized))
			g.Expect(d.Job).To(BeNil())
		})
	}

	t.Run("the same delivery inside the window is accepted, and dedupes", func(t *testing.T) {
		g := NewWithT(t)
		h := signedHeader("job.scheduled", body, now.Add(-time.Minute))
		a, err := buildkite.ParseDelivery(h, body, []byte(hookToken), now)
		g.Expect(err).NotTo(HaveOccurred())
		b, err := buildkite.ParseDelivery(h, body, []byte(hookToken), now.Add(time.Second))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(a.Job.DeliveryID).To(Equal(b.Job.DeliveryID))
	})
	t.Run("the plain token is accepted", func(t *testing.T) {
		g := NewWithT(t)
		d, err := buildkite.ParseDelivery(withToken(hookToken), body, []byte(hookToken), now)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Job.Phase).To(Equal(buildkite.PhaseDemand))
	})
	t.Run("a verified but unparsable body is malformed", func(t *testing.T) {
		g := NewWithT(t)
		junk := []byte(`{"event":"job.scheduled","job":[]}`)
		_, err := buildkite.ParseDelivery(signedHeader("job.scheduled", junk, now), junk, []byte(hookToken), now)
		g.Expect(errors.Is(err, platform.ErrMalformedWebhook)).To(BeTrue(), "%v", err)
		g.Expect(platform.WebhookHTTPStatus(err)).To(Equal(http.StatusBadRequest))
	})
}
