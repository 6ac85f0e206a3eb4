package webhook_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/webhook"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// Ways a fuzzed delivery is signed.
const (
	unsigned uint8 = iota
	signedWithAnotherKey
	signedWithTheSecret
	signatureNotHex
	signingModes
)

// FuzzReceiveDelivery feeds arbitrary bodies and event names to the receiver's HTTP handler,
// unsigned, badly signed and well signed. Properties: it never panics; a delivery without the
// right signature is refused with 401 (or 413) and queues nothing, so it can never reach a job
// ledger; a well-signed delivery is answered 202, 200 or 400, is queued only if it is a job
// event, and a job event survives a round trip (rendered as GitHub would send it, then parsed
// again, it is the same event).
func FuzzReceiveDelivery(f *testing.F) {
	for _, body := range [][]byte{
		job{id: 1, action: "queued", installation: 7}.payload(),
		job{id: 2, action: "in_progress", runner: "linux-abcde", installation: 7}.payload(),
		job{id: 3, action: "completed", repository: "octocat/hello", userOwned: true, installation: 7}.payload(),
		[]byte(`{"action":"queued","workflow_job":{"id":1},"repository":{}}`),
		[]byte(`{"zen":"Keep it logically awesome."}`),
		[]byte(`not json`),
	} {
		for mode := range signingModes {
			f.Add(body, "workflow_job", mode)
		}
	}
	f.Add([]byte(`{}`), "ping", signedWithTheSecret)
	f.Fuzz(func(t *testing.T, body []byte, event string, mode uint8) {
		receiver := webhook.NewReceiver(nil, nil, webhook.Config{Secrets: map[platform.Kind][]byte{platform.KindGitHub: secret}, MaxBodyBytes: 64 << 10, QueueSize: 1}, nil)
		req := httptest.NewRequest(http.MethodPost, webhook.Path, bytes.NewReader(body))
		req.Header.Set("X-GitHub-Event", event)
		req.Header.Set("X-GitHub-Delivery", "fuzz")
		mode %= signingModes
		switch mode {
		case signedWithAnotherKey:
			req.Header.Set("X-Hub-Signature-256", fakegithub.SignPayload([]byte("not the secret"), body))
		case signedWithTheSecret:
			req.Header.Set("X-Hub-Signature-256", fakegithub.SignPayload(secret, body))
		case signatureNotHex:
			req.Header.Set("X-Hub-Signature-256", "sha256="+string(body))
		}
		rec := httptest.NewRecorder()
		receiver.ServeHTTP(rec, req)
		stats := receiver.Stats()

		if mode != signedWithTheSecret {
			if rec.Code != http.StatusUnauthorized && rec.Code != http.StatusRequestEntityTooLarge {
				t.Fatalf("signing mode %d answered %d", mode, rec.Code)
			}
			if stats.Accepted != 0 {
				t.Fatalf("a delivery without the right signature was queued")
			}
			return
		}
		switch rec.Code {
		case http.StatusAccepted, http.StatusOK, http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("a signed delivery answered %d", rec.Code)
		}
		hook, err := githubWebhooks().ParseWebhook(req.Header, body, secret)
		queued := rec.Code == http.StatusAccepted
		isJob := err == nil && hook.Kind == platform.WebhookJob
		if queued != isJob || (queued && stats.Accepted != 1) {
			t.Fatalf("answered %d but the delivery parses as %+v, %v", rec.Code, hook, err)
		}
		if isJob {
			roundTrip(t, *hook.Job)
		}
	})
}

// roundTrip renders ev as GitHub's workflow_job payload, signs and parses it, and expects ev back.
func roundTrip(t *testing.T, ev platform.JobEvent) {
	t.Helper()
	// IDs are decimal strings in the neutral event and numbers on the wire ("" is 0: none).
	wj := map[string]any{"id": json.Number(ev.JobID), "run_id": json.Number(ev.RunID), "labels": ev.Labels, "name": ev.Name,
		"workflow_name": ev.WorkflowName, "conclusion": ev.Conclusion}
	if ev.RunnerName != "" || ev.RunnerID != "" {
		wj["runner_name"], wj["runner_id"] = ev.RunnerName, json.Number(ev.RunnerID)
	}
	p := map[string]any{"action": string(ev.State), "workflow_job": wj,
		"repository": map[string]any{"full_name": ev.Repository}, "installation": map[string]any{"id": json.Number(ev.Installation)}}
	if ev.Organization != "" {
		p["organization"] = map[string]any{"login": ev.Organization}
	}
	body, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	header := http.Header{}
	header.Set("X-GitHub-Event", "workflow_job")
	header.Set("X-GitHub-Delivery", ev.DeliveryID)
	header.Set("X-Hub-Signature-256", fakegithub.SignPayload(secret, body))
	again, err := githubWebhooks().ParseWebhook(header, body, secret)
	if err != nil || again.Job == nil {
		t.Fatalf("the rendered event does not parse: %v", err)
	}
	got, want := *again.Job, ev
	got.CreatedAt, got.StartedAt, got.CompletedAt = want.CreatedAt, want.StartedAt, want.CompletedAt
	if !slices.Equal(got.Labels, want.Labels) {
		t.Fatalf("labels %q became %q", want.Labels, got.Labels)
	}
	got.Labels, want.Labels = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip changed the event:\n want %+v\n got  %+v", want, got)
	}
}

// githubWebhooks is the parser of /webhooks/github, as registered by pkg/platform/all.
func githubWebhooks() platform.WebhookParser {
	d, ok := platform.Lookup(platform.KindGitHub)
	if !ok {
		panic("no GitHub driver registered")
	}
	return d.Webhooks
}
