package fakebuildkite

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakeserver"
)

// Delivery records one webhook the fake sent (or tried to send).
type Delivery struct {
	Event      string
	JobID      string
	StatusCode int    // the receiver's answer, 0 if it could not be reached
	Err        string // transport error, if any
	Payload    []byte
	At         time.Time
}

// Sign returns the X-Buildkite-Signature value for body sent at ts:
// "timestamp=<unix>,signature=<hex HMAC-SHA256(token, "<unix>.<body>")>".
func Sign(token string, ts time.Time, body []byte) string {
	unix := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte(unix + "." + string(body)))
	return "timestamp=" + unix + ",signature=" + hex.EncodeToString(mac.Sum(nil))
}

// PostWebhook sends body as a Buildkite webhook of event to url with the headers Buildkite
// sets: the event, and the token itself or (signature) an HMAC signature dated now.
func PostWebhook(ctx context.Context, client *http.Client, url, token string, signature bool, event string, body []byte) (int, error) {
	h := http.Header{}
	h.Set("User-Agent", "Buildkite-Request")
	h.Set("X-Buildkite-Event", event)
	h.Set("X-Buildkite-Request", NewUUID())
	if signature {
		h.Set("X-Buildkite-Signature", Sign(token, time.Now(), body))
	} else {
		h.Set("X-Buildkite-Token", token)
	}
	return fakeserver.PostJSON(ctx, client, url, h, body)
}

// webhookTime is the date format of webhook payloads (not the REST API's).
func webhookTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02 15:04:05 MST")
}

// webhookPayloadLocked is the body Buildkite sends for a job event: {event, job, build,
// pipeline, sender}, with webhook-format dates.
func (s *Server) webhookPayloadLocked(event string, j *Job) map[string]any {
	job := s.jobJSONLocked(j)
	for k, t := range map[string]time.Time{"created_at": j.CreatedAt, "scheduled_at": j.ScheduledAt, "runnable_at": j.RunnableAt, "started_at": j.StartedAt, "finished_at": j.FinishedAt} {
		job[k] = webhookTime(t)
	}
	build := s.buildJSONLocked(j.Build)
	pipeline := build["pipeline"]
	delete(build, "jobs")
	delete(build, "pipeline")
	build["created_at"] = webhookTime(j.Build.CreatedAt)
	return map[string]any{
		"event":    event,
		"job":      job,
		"build":    build,
		"pipeline": pipeline,
		"sender":   map[string]any{"id": "00000000-0000-4000-8000-000000000002", "name": "Buildkite"},
	}
}

// SendPing delivers the ping event Buildkite sends when a webhook notification service is saved
// (https://buildkite.com/docs/apis/webhooks/pipelines#events): the service, the organization
// and the sender, no job. It is recorded in Deliveries like the job events.
func (s *Server) SendPing() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.WebhookURL == "" {
		return
	}
	org := s.organizationJSON()
	body, _ := json.Marshal(map[string]any{
		"event": "ping",
		"service": map[string]any{"id": NewUUIDFrom("webhook:" + s.opts.WebhookURL), "provider": "webhook",
			"settings": map[string]any{"url": s.opts.WebhookURL}},
		"organization": map[string]any{"id": org["id"], "slug": org["slug"], "name": org["name"]},
		"sender":       map[string]any{"id": "00000000-0000-4000-8000-000000000002", "name": "Buildkite"},
	})
	s.hooks.Push(pendingHook{url: s.opts.WebhookURL, token: s.opts.WebhookToken, signature: s.opts.WebhookSignature,
		delivery: Delivery{Event: "ping", Payload: body}})
}

// Deliveries returns the webhooks sent so far, in order.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.deliveries...)
}

// enqueueJobHookLocked queues a delivery of event for j's current state; the caller holds s.mu.
func (s *Server) enqueueJobHookLocked(event string, j *Job) {
	if s.opts.WebhookURL == "" {
		return
	}
	body, _ := json.Marshal(s.webhookPayloadLocked(event, j))
	s.hooks.Push(pendingHook{url: s.opts.WebhookURL, token: s.opts.WebhookToken, signature: s.opts.WebhookSignature,
		delivery: Delivery{Event: event, JobID: j.ID, Payload: body}})
}

type pendingHook struct {
	url, token string
	signature  bool
	delivery   Delivery
}

// sendHook delivers one queued webhook and records the delivery.
func (s *Server) sendHook(ctx context.Context, h pendingHook) {
	d := h.delivery
	status, err := PostWebhook(ctx, s.opts.WebhookClient, h.url, h.token, h.signature, d.Event, d.Payload)
	d.StatusCode, d.At = status, time.Now()
	if err != nil {
		d.Err = err.Error()
	}
	s.mu.Lock()
	s.deliveries = append(s.deliveries, d)
	s.mu.Unlock()
}
