package buildkite

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	bk "github.com/buildkite/go-buildkite/v4"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Webhook headers Buildkite sends.
const (
	HeaderEvent     = "X-Buildkite-Event"
	HeaderToken     = "X-Buildkite-Token"
	HeaderSignature = "X-Buildkite-Signature"
)

// MaxSignatureAge is how far a signed delivery's timestamp may be from now. Buildkite signs
// "<timestamp>.<body>" with the dispatch time, so a captured delivery replayed later carries an
// old timestamp and is refused; within the window a replay is only a duplicate, which the
// ledger's dedupe on job ID and state absorbs.
const MaxSignatureAge = 5 * time.Minute

// Verify authenticates a delivery with the webhook's token, whichever way Buildkite was told
// to send it: X-Buildkite-Signature (HMAC-SHA256 keyed by the token over "<timestamp>.<body>",
// fresh within MaxSignatureAge) or X-Buildkite-Token (the token itself, compared in constant
// time). A signature is preferred when both are present. Every failure is
// platform.ErrInvalidSignature; an empty token refuses everything.
func Verify(header http.Header, body, token []byte, now time.Time) error {
	if len(token) == 0 {
		return fmt.Errorf("%w: no webhook token is configured", platform.ErrInvalidSignature)
	}
	if sig := header.Get(HeaderSignature); sig != "" {
		return verifySignature(sig, body, token, now)
	}
	if got := header.Get(HeaderToken); got != "" {
		// Hashing first makes the comparison constant-time in the length too.
		a, b := sha256.Sum256([]byte(got)), sha256.Sum256(token)
		if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
			return fmt.Errorf("%w: %s does not match", platform.ErrInvalidSignature, HeaderToken)
		}
		return nil
	}
	return fmt.Errorf("%w: neither %s nor %s is present", platform.ErrInvalidSignature, HeaderSignature, HeaderToken)
}

func verifySignature(value string, body, token []byte, now time.Time) error {
	var ts, sig string
	for _, part := range strings.Split(value, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case k == "timestamp" && ts == "":
			ts = v
		case k == "signature" && sig == "":
			sig = v
		default:
			return fmt.Errorf("%w: %s is not timestamp=<unix>,signature=<hex>", platform.ErrInvalidSignature, HeaderSignature)
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s has no valid timestamp", platform.ErrInvalidSignature, HeaderSignature)
	}
	mac, err := hex.DecodeString(sig)
	if err != nil || len(mac) != sha256.Size {
		return fmt.Errorf("%w: %s has no valid signature", platform.ErrInvalidSignature, HeaderSignature)
	}
	h := hmac.New(sha256.New, token)
	h.Write([]byte(ts))
	h.Write([]byte("."))
	h.Write(body)
	if !hmac.Equal(mac, h.Sum(nil)) {
		return fmt.Errorf("%w: %s does not match the body", platform.ErrInvalidSignature, HeaderSignature)
	}
	// Checked after the MAC so that only a genuine, stale delivery is called a replay.
	if age := now.Sub(time.Unix(unix, 0)); age > MaxSignatureAge || age < -MaxSignatureAge {
		return fmt.Errorf("%w: signed %s ago, outside the %s window (a replay?)", platform.ErrInvalidSignature, age.Round(time.Second), MaxSignatureAge)
	}
	return nil
}

// JobEvent is a verified job webhook in Buildkite's terms.
type JobEvent struct {
	Event string // job.scheduled, job.started, job.finished, job.activated
	// DeliveryID is derived from the event, the job and its state: Buildkite sends no delivery
	// ID, and a redelivery of the same transition must dedupe.
	DeliveryID   string
	JobID        string
	JobType      string // script, manual, waiter, trigger
	Name         string
	State        string // Buildkite's job state
	Phase        Phase
	Rules        []string // agent_query_rules, key=value
	Organization string
	Pipeline     string
	BuildID      string
	BuildNumber  int
	AgentID      string
	AgentName    string
	ExitStatus   *int
	// URL is the job's web_url.
	URL        string
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
}

// Queue is the queue the job targets.
func (e JobEvent) Queue() string {
	t, err := ParseTags(e.Rules)
	if err != nil {
		return ""
	}
	return t.Queue()
}

// Kind says what a verified delivery is.
type Kind string

// Kinds of delivery.
const (
	KindJob     Kind = "job"     // a command job's transition: Job is set
	KindPing    Kind = "ping"    // the webhook's settings changed
	KindIgnored Kind = "ignored" // build and agent events, block/wait/trigger jobs, unknown states
)

// Delivery is a verified, parsed webhook.
type Delivery struct {
	Kind  Kind
	Event string
	Job   *JobEvent
}

// ParseDelivery verifies a delivery (see Verify) and parses it. A body that does not parse is
// platform.ErrMalformedWebhook; events HyperFleet does not act on come back as KindIgnored.
func ParseDelivery(header http.Header, body, token []byte, now time.Time) (Delivery, error) {
	if err := Verify(header, body, token, now); err != nil {
		return Delivery{}, err
	}
	event := header.Get(HeaderEvent)
	d := Delivery{Kind: KindIgnored, Event: event}
	switch event {
	case "":
		return d, fmt.Errorf("%w: no %s header", platform.ErrMalformedWebhook, HeaderEvent)
	case "ping":
		d.Kind = KindPing
		return d, nil
	case "job.scheduled", "job.started", "job.finished", "job.activated":
	default:
		return d, nil
	}
	parsed, err := bk.ParseWebHook(event, body)
	if err != nil {
		return d, fmt.Errorf("%w: %v", platform.ErrMalformedWebhook, err)
	}
	var ev bk.JobEvent
	switch p := parsed.(type) {
	case *bk.JobScheduledEvent:
		ev = p.JobEvent
	case *bk.JobStartedEvent:
		ev = p.JobEvent
	case *bk.JobFinishedEvent:
		ev = p.JobEvent
	case *bk.JobActivatedEvent:
		ev = p.JobEvent
	}
	if ev.Job.ID == "" {
		return d, fmt.Errorf("%w: %s without a job ID", platform.ErrMalformedWebhook, event)
	}
	phase, known := PhaseOf(ev.Job.State)
	if !known || !NeedsAgent(ev.Job.Type) {
		return d, nil
	}
	j := &JobEvent{
		Event: event, JobID: ev.Job.ID, JobType: ev.Job.Type, Name: ev.Job.Name, State: ev.Job.State, Phase: phase,
		Rules: ev.Job.AgentQueryRules, Organization: organizationOf(ev), Pipeline: ev.Pipeline.Slug,
		BuildID: ev.Build.ID, BuildNumber: ev.Build.Number, AgentID: ev.Job.Agent.ID, AgentName: ev.Job.Agent.Name,
		ExitStatus: ev.Job.ExitStatus, CreatedAt: timeOf(ev.Job.CreatedAt), StartedAt: timeOf(ev.Job.StartedAt),
		FinishedAt: timeOf(ev.Job.FinishedAt), URL: ev.Job.WebURL,
	}
	if _, err := ParseTags(j.Rules); err != nil {
		return d, fmt.Errorf("%w: job %s: %v", platform.ErrMalformedWebhook, j.JobID, err)
	}
	sum := sha256.Sum256([]byte(event + "/" + j.JobID + "/" + j.State))
	j.DeliveryID = hex.EncodeToString(sum[:16])
	d.Kind, d.Job = KindJob, j
	return d, nil
}

func timeOf(ts *bk.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.Time
}

// organizationOf reads the organization slug from the pipeline's or build's API URL
// (.../v2/organizations/<org>/pipelines/...): the payload names it nowhere else.
func organizationOf(ev bk.JobEvent) string {
	for _, raw := range []string{ev.Pipeline.URL, ev.Build.URL} {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		parts := strings.Split(strings.Trim(u.Path, "/"), "/")
		for i := 0; i+1 < len(parts); i++ {
			if parts[i] == "organizations" {
				return parts[i+1]
			}
		}
	}
	return ""
}
