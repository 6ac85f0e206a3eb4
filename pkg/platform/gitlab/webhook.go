package gitlab

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Webhook headers GitLab sends.
const (
	HeaderEvent     = "X-Gitlab-Event"
	HeaderToken     = "X-Gitlab-Token"
	HeaderEventUUID = "X-Gitlab-Event-UUID"
	HeaderInstance  = "X-Gitlab-Instance"
)

// Verify authenticates a delivery: GitLab sends the webhook's secret token itself in
// X-Gitlab-Token, compared here in constant time. Every failure is
// platform.ErrInvalidSignature; an empty secret refuses everything.
func Verify(header http.Header, secret []byte) error {
	if len(secret) == 0 {
		return fmt.Errorf("%w: no webhook secret token is configured", platform.ErrInvalidSignature)
	}
	got := header.Get(HeaderToken)
	if got == "" {
		return fmt.Errorf("%w: no %s header", platform.ErrInvalidSignature, HeaderToken)
	}
	// Hashing first makes the comparison constant-time in the length too.
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256(secret)
	if subtle.ConstantTimeCompare(a[:], b[:]) != 1 {
		return fmt.Errorf("%w: %s does not match", platform.ErrInvalidSignature, HeaderToken)
	}
	return nil
}

// JobEvent is a verified Job Hook in GitLab's terms.
type JobEvent struct {
	// DeliveryID is X-Gitlab-Event-UUID, or, without it, derived from the job and its status so
	// that a redelivery of the same transition dedupes.
	DeliveryID  string
	JobID       int64
	PipelineID  int64
	ProjectID   int64
	ProjectPath string // path_with_namespace, e.g. "acme/platform/api"
	Name        string
	Stage       string
	Status      string
	Phase       Phase
	Ref         string
	Tag         bool // the ref is a tag
	// RunnerID, RunnerDescription and RunnerTags describe the runner that has the job. A Job
	// Hook does not carry the job's own tags: read the job (Client.GetJob) to match it.
	RunnerID          int64
	RunnerDescription string
	RunnerTags        []string
	FailureReason     string
	// URL is the job's page: the project's web URL (or, from older GitLab, its repository's
	// homepage) and /-/jobs/<id>; empty when the hook gives neither.
	URL        string
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
}

// Kind says what a verified delivery is.
type Kind string

// Kinds of delivery.
const (
	KindJob     Kind = "job"     // a job's status change: Job is set
	KindIgnored Kind = "ignored" // every other event, and unknown statuses
)

// Delivery is a verified, parsed webhook.
type Delivery struct {
	Kind  Kind
	Event string
	// Instance is X-Gitlab-Instance, the sending instance's URL, when GitLab sent it.
	Instance string
	Job      *JobEvent
}

// jobHook is a Job Hook body: client-go's JobEvent and the project object newer GitLab
// versions add, which carries the project's path.
type jobHook struct {
	gl.JobEvent
	Project struct {
		ID                int64  `json:"id"`
		PathWithNamespace string `json:"path_with_namespace"`
		WebURL            string `json:"web_url"`
	} `json:"project"`
}

// ParseDelivery verifies a delivery (see Verify) and parses it. A Job Hook that does not parse
// is platform.ErrMalformedWebhook; other events come back as KindIgnored.
func ParseDelivery(header http.Header, body, secret []byte) (Delivery, error) {
	if err := Verify(header, secret); err != nil {
		return Delivery{}, err
	}
	event := header.Get(HeaderEvent)
	d := Delivery{Kind: KindIgnored, Event: event, Instance: header.Get(HeaderInstance)}
	switch event {
	case "":
		return d, fmt.Errorf("%w: no %s header", platform.ErrMalformedWebhook, HeaderEvent)
	case string(gl.EventTypeJob):
	default:
		return d, nil
	}
	var ev jobHook
	if err := json.Unmarshal(body, &ev); err != nil {
		return d, fmt.Errorf("%w: %v", platform.ErrMalformedWebhook, err)
	}
	if ev.ObjectKind != "build" || ev.BuildID <= 0 || ev.ProjectID <= 0 {
		return d, fmt.Errorf("%w: a Job Hook needs object_kind build, a build_id and a project_id", platform.ErrMalformedWebhook)
	}
	phase, known := PhaseOf(ev.BuildStatus)
	if !known {
		return d, nil
	}
	path := ev.Project.PathWithNamespace
	if path == "" {
		path = pathOfURL(ev.Repository)
	}
	if path == "" {
		return d, fmt.Errorf("%w: job %d names no project path", platform.ErrMalformedWebhook, ev.BuildID)
	}
	j := &JobEvent{
		DeliveryID: header.Get(HeaderEventUUID), JobID: ev.BuildID, PipelineID: ev.PipelineID, ProjectID: ev.ProjectID,
		ProjectPath: path, Name: ev.BuildName, Stage: ev.BuildStage, Status: ev.BuildStatus, Phase: phase, Ref: ev.Ref,
		Tag: ev.Tag, RunnerID: ev.Runner.ID, RunnerDescription: ev.Runner.Description, RunnerTags: ev.Runner.Tags,
		FailureReason: ev.BuildFailureReason, CreatedAt: hookTime(ev.BuildCreatedAt), StartedAt: hookTime(ev.BuildStartedAt),
		FinishedAt: hookTime(ev.BuildFinishedAt),
	}
	web := ev.Project.WebURL
	if web == "" && ev.Repository != nil {
		web = ev.Repository.Homepage
	}
	if web != "" {
		j.URL = strings.TrimSuffix(web, "/") + "/-/jobs/" + strconv.FormatInt(ev.BuildID, 10)
	}
	if j.DeliveryID == "" {
		sum := sha256.Sum256([]byte(strconv.FormatInt(j.JobID, 10) + "/" + j.Status))
		j.DeliveryID = fmt.Sprintf("%x", sum[:16])
	}
	d.Kind, d.Job = KindJob, j
	return d, nil
}

// pathOfURL reads a project's path from its repository homepage, for older payloads without
// the project object. A relative URL root cannot be told from a group, so it is a fallback.
func pathOfURL(repo *gl.Repository) string {
	if repo == nil || repo.Homepage == "" {
		return ""
	}
	u, err := url.Parse(repo.Homepage)
	if err != nil {
		return ""
	}
	return strings.Trim(u.Path, "/")
}

// hookTime parses a Job Hook's times ("2021-02-23 02:41:37 UTC", or RFC 3339 in some
// versions); zero when null or unreadable.
func hookTime(s string) time.Time {
	for _, layout := range []string{"2006-01-02 15:04:05 MST", "2006-01-02 15:04:05 -0700", time.RFC3339Nano} {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}
