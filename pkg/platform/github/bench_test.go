package github

import (
	"net/http"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// BenchmarkParseWebhook is the synchronous part of answering a delivery: constant-time signature
// check and parsing. GitHub gives a delivery 10 s; this shows the receiver needs microseconds.
func BenchmarkParseWebhook(b *testing.B) {
	body := []byte(workflowJobPayload("queued"))
	h := http.Header{}
	h.Set(HeaderEvent, EventWorkflowJob)
	h.Set(HeaderDelivery, "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	h.Set(HeaderSignatureSHA256, fakegithub.SignPayload(testSecret, body))
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := ParseWebhook(h, body, testSecret); err != nil {
			b.Fatal(err)
		}
	}
}
