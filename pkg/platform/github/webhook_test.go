package github

import (
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // to prove the legacy SHA-1 signature is refused
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

var testSecret = []byte("It's a Secret to Everybody")

func sha1Signature(secret, body []byte) string {
	mac := hmac.New(sha1.New, secret)
	mac.Write(body)
	return "sha1=" + hex.EncodeToString(mac.Sum(nil))
}

func TestVerifySignature(t *testing.T) {
	body := []byte(`{"action":"queued"}`)
	tests := []struct {
		name   string
		secret []byte
		header string
		ok     bool
	}{
		{name: "good signature", secret: testSecret, header: fakegithub.SignPayload(testSecret, body), ok: true},
		{name: "signature of another body", secret: testSecret, header: fakegithub.SignPayload(testSecret, []byte(`{}`))},
		{name: "wrong secret", secret: testSecret, header: fakegithub.SignPayload([]byte("guess"), body)},
		{name: "missing header", secret: testSecret, header: ""},
		{name: "sha1 signature only", secret: testSecret, header: sha1Signature(testSecret, body)},
		{name: "bare hex without algorithm", secret: testSecret, header: fakegithub.SignPayload(testSecret, body)[len("sha256="):]},
		{name: "not hex", secret: testSecret, header: "sha256=zz"},
		{name: "truncated signature", secret: testSecret, header: fakegithub.SignPayload(testSecret, body)[:20]},
		{name: "no secret configured fails closed", secret: nil, header: fakegithub.SignPayload(nil, body)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			err := VerifySignature(tt.secret, body, tt.header)
			if tt.ok {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(platform.ErrInvalidSignature))
			g.Expect(platform.WebhookHTTPStatus(err)).To(Equal(http.StatusUnauthorized))
		})
	}
}

func TestParseWebhookRefusesSHA1OnlyDelivery(t *testing.T) {
	g := NewWithT(t)
	body := workflowJobPayload("queued")
	h := http.Header{}
	h.Set(HeaderEvent, EventWorkflowJob)
	h.Set("X-Hub-Signature", sha1Signature(testSecret, body))

	_, err := ParseWebhook(h, body, testSecret)

	g.Expect(err).To(MatchError(platform.ErrInvalidSignature))
}

func workflowJobPayload(action string) []byte {
	return []byte(`{
  "action": "` + action + `",
  "workflow_job": {
    "id": 29679449, "run_id": 10835573, "status": "` + action + `", "conclusion": null,
    "name": "build", "workflow_name": "CI",
    "labels": ["self-hosted", "Linux", "X64"],
    "runner_id": 12, "runner_name": "hf-pool-a-1",
    "html_url": "https://github.com/acme/api/actions/runs/10835573/job/29679449",
    "created_at": "2026-01-02T03:04:05Z", "started_at": "2026-01-02T03:04:15Z"
  },
  "repository": {"id": 1, "name": "api", "full_name": "acme/api", "owner": {"login": "acme"}},
  "organization": {"login": "acme"},
  "installation": {"id": 101}
}`)
}

func TestParseWebhook(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name      string
		event     string
		body      []byte
		wantKind  platform.WebhookKind
		wantState platform.JobState
		wantErr   error
	}{
		{name: "queued", event: "workflow_job", body: workflowJobPayload("queued"), wantKind: platform.WebhookJob, wantState: platform.JobQueued},
		{name: "waiting", event: "workflow_job", body: workflowJobPayload("waiting"), wantKind: platform.WebhookJob, wantState: platform.JobWaiting},
		{name: "queued while an environment holds it (status waiting)", event: "workflow_job",
			body:     []byte(strings.Replace(string(workflowJobPayload("queued")), `"status": "queued"`, `"status": "waiting"`, 1)),
			wantKind: platform.WebhookJob, wantState: platform.JobWaiting},
		{name: "in_progress", event: "workflow_job", body: workflowJobPayload("in_progress"), wantKind: platform.WebhookJob, wantState: platform.JobInProgress},
		{name: "completed", event: "workflow_job", body: workflowJobPayload("completed"), wantKind: platform.WebhookJob, wantState: platform.JobCompleted},
		{name: "unknown action is ignored", event: "workflow_job", body: workflowJobPayload("requeued"), wantKind: platform.WebhookIgnored},
		{name: "malformed JSON", event: "workflow_job", body: []byte(`{"action": "queued", "workflow_job": {`), wantErr: platform.ErrMalformedWebhook},
		{name: "workflow_job without job", event: "workflow_job", body: []byte(`{"action": "queued"}`), wantErr: platform.ErrMalformedWebhook},
		{name: "ping", event: "ping", body: []byte(`{"zen": "Keep it logically awesome.", "hook_id": 1}`), wantKind: platform.WebhookPing},
		{name: "other event", event: "push", body: []byte(`{"ref": "refs/heads/main"}`), wantKind: platform.WebhookIgnored},
		{name: "missing event header", event: "", body: []byte(`{}`), wantErr: platform.ErrMalformedWebhook},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			h := http.Header{}
			h.Set(HeaderEvent, tt.event)
			h.Set(HeaderDelivery, "d-1")
			h.Set(HeaderSignatureSHA256, fakegithub.SignPayload(testSecret, tt.body))

			hook, err := Webhooks.ParseWebhook(h, tt.body, testSecret)

			if tt.wantErr != nil {
				g.Expect(err).To(MatchError(tt.wantErr))
				g.Expect(platform.WebhookHTTPStatus(err)).To(Equal(http.StatusBadRequest))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(hook.Kind).To(Equal(tt.wantKind))
			g.Expect(hook.Event).To(Equal(tt.event))
			g.Expect(hook.DeliveryID).To(Equal("d-1"))
			if tt.wantKind != platform.WebhookJob {
				g.Expect(hook.Job).To(BeNil())
				return
			}
			g.Expect(*hook.Job).To(Equal(platform.JobEvent{
				DeliveryID: "d-1", JobID: "29679449", RunID: "10835573", State: tt.wantState,
				Labels: []string{"linux", "self-hosted", "x64"}, Repository: "acme/api", Organization: "acme",
				Installation: "101", RunnerID: "12", RunnerName: "hf-pool-a-1", Name: "build", WorkflowName: "CI",
				URL:       "https://github.com/acme/api/actions/runs/10835573/job/29679449",
				CreatedAt: created, StartedAt: created.Add(10 * time.Second),
			}))
			g.Expect(hook.Job.Scope().Effective()).To(Equal(platform.Scope{Repository: "acme/api"}))
		})
	}
}
