package webhook_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1" //nolint:gosec // to prove a SHA-1-only delivery is refused
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/webhook"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

func sha1Signature(key, body []byte) string {
	mac := hmac.New(sha1.New, key)
	mac.Write(body)
	return "sha1=" + hex.EncodeToString(mac.Sum(nil))
}

// delivery is one raw HTTP request to the receiver.
type delivery struct {
	method string
	path   string
	event  string
	body   []byte
	// sign sets the signature headers; nil sends none.
	sign func(req *http.Request, body []byte)
}

func signed(req *http.Request, body []byte) {
	req.Header.Set("X-Hub-Signature-256", fakegithub.SignPayload(secret, body))
	req.Header.Set("X-Hub-Signature", sha1Signature(secret, body))
}

func (h *harness) send(g Gomega, d delivery) int {
	if d.method == "" {
		d.method = http.MethodPost
	}
	if d.path == "" {
		d.path = webhook.Path
	}
	url := strings.TrimSuffix(h.url, webhook.Path) + d.path
	req, err := http.NewRequestWithContext(context.Background(), d.method, url, bytes.NewReader(d.body))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", d.event)
	req.Header.Set("X-GitHub-Delivery", fakegithub.NewDeliveryID())
	if d.sign != nil {
		d.sign(req, d.body)
	}
	resp, err := h.client.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func TestHTTPStatusCodes(t *testing.T) {
	h := startReceiver(t, webhook.Config{MaxBodyBytes: 8 << 10}, true)
	queued := job{id: 1, action: "queued"}.payload()
	tests := []struct {
		name string
		d    delivery
		want int
	}{
		{name: "good signature", d: delivery{event: "workflow_job", body: queued, sign: signed}, want: http.StatusAccepted},
		{name: "forged signature", d: delivery{event: "workflow_job", body: queued, sign: func(req *http.Request, _ []byte) {
			req.Header.Set("X-Hub-Signature-256", fakegithub.SignPayload(secret, []byte(`{"action":"queued"}`)))
		}}, want: http.StatusUnauthorized},
		{name: "missing signature", d: delivery{event: "workflow_job", body: queued}, want: http.StatusUnauthorized},
		{name: "sha1 signature only", d: delivery{event: "workflow_job", body: queued, sign: func(req *http.Request, body []byte) {
			req.Header.Set("X-Hub-Signature", sha1Signature(secret, body))
		}}, want: http.StatusUnauthorized},
		{name: "wrong secret", d: delivery{event: "workflow_job", body: queued, sign: func(req *http.Request, body []byte) {
			req.Header.Set("X-Hub-Signature-256", fakegithub.SignPayload([]byte("guess"), body))
		}}, want: http.StatusUnauthorized},
		{name: "malformed JSON", d: delivery{event: "workflow_job", body: []byte(`{"action":"queued","workflow_job":{`), sign: signed}, want: http.StatusBadRequest},
		{name: "missing event header", d: delivery{body: queued, sign: signed}, want: http.StatusBadRequest},
		{name: "oversized body", d: delivery{event: "workflow_job", body: bytes.Repeat([]byte(" "), 9<<10), sign: signed}, want: http.StatusRequestEntityTooLarge},
		{name: "ping", d: delivery{event: "ping", body: []byte(`{"zen":"Keep it logically awesome.","hook_id":1}`), sign: signed}, want: http.StatusOK},
		{name: "other event", d: delivery{event: "push", body: []byte(`{"ref":"refs/heads/main"}`), sign: signed}, want: http.StatusOK},
		{name: "unknown workflow_job action", d: delivery{event: "workflow_job", body: job{id: 2, action: "requeued"}.payload(), sign: signed}, want: http.StatusOK},
		{name: "GET", d: delivery{method: http.MethodGet, event: "workflow_job", sign: signed}, want: http.StatusMethodNotAllowed},
		{name: "other path", d: delivery{path: "/", event: "workflow_job", body: queued, sign: signed}, want: http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(h.send(g, tt.d)).To(Equal(tt.want))
		})
	}
	g := NewWithT(t)
	h.waitIdle(g)
	s := h.receiver.Stats()
	g.Expect(s.Accepted).To(Equal(uint64(1)))
	g.Expect(s.Unauthorized).To(Equal(uint64(4)))
	g.Expect(s.Malformed).To(Equal(uint64(2)))
	g.Expect(s.TooLarge).To(Equal(uint64(1)))
	g.Expect(s.Ignored).To(Equal(uint64(3)))
	g.Expect(s.Unrouted).To(Equal(uint64(1)), "no pool exists")
}

func TestOversizedBodyWithoutContentLength(t *testing.T) {
	g := NewWithT(t)
	h := startReceiver(t, webhook.Config{MaxBodyBytes: 1 << 10}, true)
	body := bytes.Repeat([]byte("x"), 4<<10)
	// A reader of unknown length makes the client send a chunked body, so only reading
	// reveals the size.
	req, err := http.NewRequest(http.MethodPost, h.url, io.MultiReader(bytes.NewReader(body)))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("X-GitHub-Event", "workflow_job")
	req.Header.Set("X-Hub-Signature-256", fakegithub.SignPayload(secret, body))
	resp, err := h.client.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusRequestEntityTooLarge))
}

func TestForgedDeliveryCreatesNothing(t *testing.T) {
	g := NewWithT(t)
	h := startReceiver(t, webhook.Config{}, true)
	pool := h.createPool(t, "linux", fleetv1.GitHubSpec{Organization: "acme", Labels: []string{"linux"}})
	body := job{id: 1, action: "queued"}.payload()

	status, err := fakegithub.PostWebhook(context.Background(), h.client, h.url, []byte("not the secret"), "workflow_job", fakegithub.NewDeliveryID(), body)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusUnauthorized))

	g.Consistently(func() bool {
		err := env.Client.Get(context.Background(), demand.ConfigMapKey(pool), &corev1.ConfigMap{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(500 * time.Millisecond).Should(BeTrue())
	g.Expect(h.receiver.Stats().Accepted).To(BeZero())
	g.Expect(h.notifications(pool)).To(BeZero())
}
