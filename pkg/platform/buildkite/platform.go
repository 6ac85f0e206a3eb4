package buildkite

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Platform is one pool's view of Buildkite behind platform.Platform: the organization's client
// and the tags the pool's agents start with.
type Platform struct {
	*Client
	// tags are the pool's agent tags, its queue among them; mark is its platform.PoolRunnerLabel.
	tags Tags
	mark string
}

var _ platform.Platform = (*Platform)(nil)

// Kind is platform.KindBuildkite.
func (p *Platform) Kind() platform.Kind { return platform.KindBuildkite }

// ParseWebhook verifies and parses a delivery; see the package-level ParseWebhook.
func (p *Platform) ParseWebhook(header http.Header, body, secret []byte) (platform.Webhook, error) {
	return ParseWebhook(header, body, secret)
}

// ParseWebhook verifies a Buildkite delivery (Verify) and maps it onto the ledger's terms: a
// command job's transition is a WebhookJob whose labels are its agent query rules (with
// queue=default when it names no queue) and whose repository is "<org>/<pipeline>".
func ParseWebhook(header http.Header, body, secret []byte) (platform.Webhook, error) {
	d, err := ParseDelivery(header, body, secret, time.Now())
	if err != nil {
		return platform.Webhook{}, err
	}
	w := platform.Webhook{Kind: platform.WebhookIgnored, Event: d.Event}
	switch d.Kind {
	case KindPing:
		w.Kind = platform.WebhookPing
	case KindJob:
		j := d.Job
		w.Kind, w.DeliveryID = platform.WebhookJob, j.DeliveryID
		w.Job = &platform.JobEvent{
			DeliveryID: j.DeliveryID, JobID: j.JobID, RunID: j.BuildID, State: ledgerState(j.Phase),
			Labels: jobLabels(j.Rules), Repository: j.Organization + "/" + j.Pipeline, Organization: j.Organization,
			Installation: j.Organization, RunnerID: j.AgentID, RunnerName: j.AgentName, Conclusion: conclusion(j), URL: j.URL,
			Name: j.Name, WorkflowName: j.Pipeline, CreatedAt: j.CreatedAt, StartedAt: j.StartedAt, CompletedAt: j.FinishedAt,
		}
	}
	return w, nil
}

// ledgerState maps a phase onto the ledger's states.
func ledgerState(p Phase) platform.JobState {
	switch p {
	case PhaseDemand:
		return platform.JobQueued
	case PhaseHeld:
		return platform.JobWaiting
	case PhaseInProgress:
		return platform.JobInProgress
	default:
		return platform.JobCompleted
	}
}

func conclusion(j *JobEvent) string {
	switch {
	case j.Phase != PhaseCompleted:
		return ""
	case j.State != "finished":
		return j.State
	case j.ExitStatus != nil && *j.ExitStatus == 0:
		return "success"
	default:
		return "failure"
	}
}

// jobLabels are a job's agent query rules as ledger labels, with the default queue made
// explicit so that only a default-queue pool matches a job that names no queue.
func jobLabels(rules []string) []string {
	t, err := ParseTags(rules)
	if err != nil {
		return nil // matches no pool
	}
	if _, ok := t["queue"]; !ok {
		t["queue"] = DefaultQueue
	}
	return t.Strings()
}

// QueuedJobs lists the organization's scheduled and held command jobs from the builds API.
func (p *Platform) QueuedJobs(ctx context.Context, scope platform.Scope) ([]platform.Job, error) {
	jobs, err := p.Jobs(ctx)
	if err != nil {
		return nil, err
	}
	var out []platform.Job
	for _, j := range jobs {
		if j.Phase == PhaseDemand || j.Phase == PhaseHeld {
			out = append(out, p.neutralJob(j))
		}
	}
	return out, nil
}

func (p *Platform) neutralJob(j Job) platform.Job {
	return platform.Job{ID: j.ID, Name: j.Name, State: ledgerState(j.Phase), Labels: jobLabels(j.Rules),
		Repository: p.cfg.Organization + "/" + j.Pipeline, RunnerName: j.AgentName, CreatedAt: j.CreatedAt}
}

// GetJob finds a job among the unfinished builds' jobs. Buildkite reads a job only through its
// pipeline and build, which a job ID alone does not name; a job not found there has finished
// (or never existed): platform.ErrNotFound.
func (p *Platform) GetJob(ctx context.Context, _ platform.Scope, jobID string) (platform.Job, error) {
	jobs, err := p.Jobs(ctx)
	if err != nil {
		return platform.Job{}, err
	}
	for _, j := range jobs {
		if j.ID == jobID {
			return p.neutralJob(j), nil
		}
	}
	return platform.Job{}, &platform.Error{Class: platform.ErrNotFound, Op: "get job " + jobID, StatusCode: http.StatusNotFound,
		Err: errors.New("not among the jobs of the organization's unfinished builds")}
}

// Register creates the VM's own cluster agent token (see Client.Register). The agent's tags
// are the pool's queue and tags, with any key=value labels of spec added; the pool's mark
// (platform.PoolRunnerLabel) goes into the token's description, not into the tags.
func (p *Platform) Register(ctx context.Context, _ platform.Scope, spec platform.RunnerSpec) (platform.Registration, error) {
	tags := AgentTags("", p.tags)
	for _, l := range spec.Labels {
		if k, v, ok := strings.Cut(l, "="); ok && k != "" && k != "queue" {
			tags[k] = v
		}
	}
	reg, err := p.Client.Register(ctx, spec.Name, p.mark, tags)
	if err != nil {
		return platform.Registration{}, err
	}
	return platform.Registration{ID: reg.TokenID, Config: string(reg.Config)}, nil
}

// ListRunners lists HyperFleet's agent tokens of the cluster as runners: ID the token ID, Name
// the Machine, Labels the pool's mark. A token is reported offline and idle: deleting a token
// never stops an agent that registered with it, so a token whose Machine is gone may always go.
func (p *Platform) ListRunners(ctx context.Context, _ platform.Scope) ([]platform.Runner, error) {
	toks, err := p.Registrations(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]platform.Runner, 0, len(toks))
	for _, t := range toks {
		var labels []string
		if t.Mark != "" {
			labels = []string{t.Mark}
		}
		out = append(out, platform.Runner{ID: t.ID, Name: t.Name, Labels: labels, Status: platform.RunnerOffline})
	}
	return out, nil
}

// RemoveRunner deletes an agent token by ID; already gone is not an error.
func (p *Platform) RemoveRunner(ctx context.Context, _ platform.Scope, runnerID string) error {
	return p.Deregister(ctx, runnerID)
}

// RemoveRunnerByName deletes this pool's agent tokens of the named Machine.
func (p *Platform) RemoveRunnerByName(ctx context.Context, _ platform.Scope, name string) error {
	return p.DeregisterByName(ctx, name, p.mark)
}
