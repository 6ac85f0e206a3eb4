package github

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	gh "github.com/google/go-github/v66/github"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Webhook headers GitHub sets on every delivery.
const (
	HeaderEvent           = "X-GitHub-Event"
	HeaderDelivery        = "X-GitHub-Delivery"
	HeaderSignatureSHA256 = "X-Hub-Signature-256"
)

// EventWorkflowJob is the event HyperFleet scales on.
const EventWorkflowJob = "workflow_job"

var errNeedRepository = errors.New("a repository scope is required")

// Webhooks verifies and parses deliveries without API credentials, for webhook receivers.
var Webhooks platform.WebhookParser = webhookParser{}

type webhookParser struct{}

func (webhookParser) ParseWebhook(header http.Header, body, secret []byte) (platform.Webhook, error) {
	return ParseWebhook(header, body, secret)
}

// VerifySignature checks an X-Hub-Signature-256 header ("sha256=<hex HMAC-SHA256 of body>") in
// constant time. Only SHA-256 is accepted: go-github's ValidatePayload falls back to the
// SHA-1 X-Hub-Signature header, which HyperFleet refuses. An empty secret fails closed.
func VerifySignature(secret, body []byte, signatureHeader string) error {
	if len(secret) == 0 {
		return fmt.Errorf("%w: no webhook secret configured", platform.ErrInvalidSignature)
	}
	if signatureHeader == "" {
		return fmt.Errorf("%w: missing %s header", platform.ErrInvalidSignature, HeaderSignatureSHA256)
	}
	hexSig, ok := strings.CutPrefix(signatureHeader, "sha256=")
	if !ok {
		return fmt.Errorf("%w: %s is not sha256=<hex>", platform.ErrInvalidSignature, HeaderSignatureSHA256)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return fmt.Errorf("%w: %s is not hex", platform.ErrInvalidSignature, HeaderSignatureSHA256)
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return fmt.Errorf("%w: signature does not match", platform.ErrInvalidSignature)
	}
	return nil
}

// ParseWebhook verifies a delivery's signature before reading anything else, then parses it:
// workflow_job becomes a JobEvent, ping is acknowledged, other events are ignored.
func ParseWebhook(header http.Header, body, secret []byte) (platform.Webhook, error) {
	if err := VerifySignature(secret, body, header.Get(HeaderSignatureSHA256)); err != nil {
		return platform.Webhook{}, err
	}
	event := header.Get(HeaderEvent)
	delivery := header.Get(HeaderDelivery)
	switch event {
	case "":
		return platform.Webhook{}, fmt.Errorf("%w: missing %s header", platform.ErrMalformedWebhook, HeaderEvent)
	case "ping":
		if !json.Valid(body) {
			return platform.Webhook{}, fmt.Errorf("%w: ping body is not JSON", platform.ErrMalformedWebhook)
		}
		return platform.Webhook{Kind: platform.WebhookPing, Event: event, DeliveryID: delivery}, nil
	case EventWorkflowJob:
		return ParseWorkflowJob(delivery, body)
	default:
		return platform.Webhook{Kind: platform.WebhookIgnored, Event: event, DeliveryID: delivery}, nil
	}
}

// ParseWorkflowJob parses a verified workflow_job payload. Actions GitHub may add later are
// ignored rather than rejected, so a new action never turns into failed deliveries.
func ParseWorkflowJob(deliveryID string, body []byte) (platform.Webhook, error) {
	hook := platform.Webhook{Kind: platform.WebhookIgnored, Event: EventWorkflowJob, DeliveryID: deliveryID}
	var ev gh.WorkflowJobEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		return platform.Webhook{}, fmt.Errorf("%w: %v", platform.ErrMalformedWebhook, err)
	}
	job := ev.GetWorkflowJob()
	if job.GetID() == 0 || ev.GetRepo().GetFullName() == "" {
		return platform.Webhook{}, fmt.Errorf("%w: workflow_job without job id or repository", platform.ErrMalformedWebhook)
	}
	state := platform.JobState(ev.GetAction())
	if state == platform.JobQueued && job.GetStatus() == string(platform.JobWaiting) {
		// GitHub's own "queued" example for a job a deployment environment holds carries
		// workflow_job.status "waiting" (REST docs, "Webhook events and payloads", workflow_job):
		// the job waits for its approval, maybe for hours, and no runner can take it before. It
		// is held, not demand, until a delivery or a listing says queued.
		state = platform.JobWaiting
	}
	if !state.Valid() {
		return hook, nil
	}
	hook.Kind = platform.WebhookJob
	hook.Job = &platform.JobEvent{
		DeliveryID:   deliveryID,
		JobID:        formatID(job.GetID()),
		RunID:        formatID(job.GetRunID()),
		State:        state,
		Labels:       platform.NormalizeLabels(job.Labels),
		Repository:   ev.GetRepo().GetFullName(),
		Organization: ev.GetOrg().GetLogin(),
		Installation: formatID(ev.GetInstallation().GetID()),
		RunnerID:     formatID(job.GetRunnerID()),
		RunnerName:   job.GetRunnerName(),
		URL:          job.GetHTMLURL(),
		Conclusion:   job.GetConclusion(),
		Name:         job.GetName(),
		WorkflowName: job.GetWorkflowName(),
		CreatedAt:    job.GetCreatedAt().Time,
		StartedAt:    job.GetStartedAt().Time,
		CompletedAt:  job.GetCompletedAt().Time,
	}
	return hook, nil
}
