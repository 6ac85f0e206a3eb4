package fakegithub

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // GitHub still sends the legacy SHA-1 header; receivers must ignore it.
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakeserver"
)

// Delivery records one webhook the fake sent (or tried to send).
type Delivery struct {
	ID         string
	Event      string
	Action     string
	JobID      int64
	StatusCode int    // the receiver's answer, 0 if it could not be reached
	Err        string // transport error, if any
	Payload    []byte
	At         time.Time
}

// SignPayload returns the X-Hub-Signature-256 value for body: "sha256=" and the hex HMAC-SHA256.
func SignPayload(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func signSHA1(secret, body []byte) string {
	mac := hmac.New(sha1.New, secret)
	mac.Write(body)
	return "sha1=" + hex.EncodeToString(mac.Sum(nil))
}

// NewDeliveryID returns a GUID like the X-GitHub-Delivery header carries.
func NewDeliveryID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// PostWebhook sends body as a GitHub webhook of event type to url with the headers GitHub sets
// (event, delivery GUID, SHA-256 and legacy SHA-1 signatures); tools use it to feed a receiver.
func PostWebhook(ctx context.Context, client *http.Client, url string, secret []byte, event, deliveryID string, body []byte) (int, error) {
	h := http.Header{}
	h.Set("User-Agent", "GitHub-Hookshot/fake")
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Delivery", deliveryID)
	h.Set("X-GitHub-Hook-ID", "1")
	if len(secret) > 0 {
		h.Set("X-Hub-Signature-256", SignPayload(secret, body))
		h.Set("X-Hub-Signature", signSHA1(secret, body))
	}
	return fakeserver.PostJSON(ctx, client, url, h, body)
}

// SetWebhook points workflow_job deliveries at url (empty disables them), for receivers that
// start after the fake.
func (s *Server) SetWebhook(url, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.WebhookURL, s.opts.WebhookSecret = url, secret
}

// Deliveries returns the webhooks sent so far, in order.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.deliveries...)
}

type pendingHook struct {
	url, secret string
	delivery    Delivery
}

// sendHook delivers one queued webhook and records the delivery.
func (s *Server) sendHook(ctx context.Context, h pendingHook) {
	d := h.delivery
	status, err := PostWebhook(ctx, s.opts.WebhookClient, h.url, []byte(h.secret), d.Event, d.ID, d.Payload)
	d.StatusCode, d.At = status, time.Now()
	if err != nil {
		d.Err = err.Error()
	}
	s.mu.Lock()
	s.deliveries = append(s.deliveries, d)
	s.mu.Unlock()
	s.log.Debug("webhook delivered", "action", d.Action, "job", d.JobID, "status", status, "err", d.Err)
}

// enqueueJobHookLocked queues a workflow_job delivery for j's current state; the caller holds s.mu.
func (s *Server) enqueueJobHookLocked(action string, j *Job) {
	if s.opts.WebhookURL == "" {
		return
	}
	body, _ := json.Marshal(s.webhookPayloadLocked(action, j))
	s.hooks.Push(pendingHook{url: s.opts.WebhookURL, secret: s.opts.WebhookSecret, delivery: Delivery{
		ID: NewDeliveryID(), Event: "workflow_job", Action: action, JobID: j.ID, Payload: body,
	}})
}
