package gitlab

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Platform is one pool's view of GitLab behind platform.Platform: the instance's client and
// what the pool's runners are created with.
type Platform struct {
	*Client
	settings RunnerSettings
	// mark is the pool's platform.PoolRunnerLabel, one of its runners' tags.
	mark string
}

var _ platform.Platform = (*Platform)(nil)

// Kind is platform.KindGitLab.
func (p *Platform) Kind() platform.Kind { return platform.KindGitLab }

// ParseWebhook verifies and parses a delivery; see the package-level ParseWebhook.
func (p *Platform) ParseWebhook(header http.Header, body, secret []byte) (platform.Webhook, error) {
	return ParseWebhook(header, body, secret)
}

// ParseWebhook verifies a GitLab delivery (ParseDelivery) and maps a Job Hook onto the
// ledger's terms: the job's project path is its repository, its top-level group its
// organization, and the instance's host its installation. A Job Hook carries no job tags (its
// runner's tags are the runner's), so the event says LabelsUnknown: read the job (GetJob).
func ParseWebhook(header http.Header, body, secret []byte) (platform.Webhook, error) {
	d, err := ParseDelivery(header, body, secret)
	if err != nil {
		return platform.Webhook{}, err
	}
	w := platform.Webhook{Kind: platform.WebhookIgnored, Event: d.Event}
	if d.Kind != KindJob {
		return w, nil
	}
	j := d.Job
	org, _, _ := strings.Cut(j.ProjectPath, "/")
	ev := &platform.JobEvent{
		DeliveryID: j.DeliveryID, JobID: strconv.FormatInt(j.JobID, 10), RunID: strconv.FormatInt(j.PipelineID, 10),
		State: ledgerState(j.Phase), LabelsUnknown: true, Repository: j.ProjectPath, Organization: org, Installation: hostOf(d.Instance),
		Conclusion: conclusion(j.Phase, j.Status), Name: j.Name, WorkflowName: j.Stage, CreatedAt: j.CreatedAt, URL: j.URL,
		StartedAt: j.StartedAt, CompletedAt: j.FinishedAt,
	}
	if j.RunnerID != 0 {
		ev.RunnerID = strconv.FormatInt(j.RunnerID, 10)
		ev.RunnerName = strings.TrimPrefix(j.RunnerDescription, DescriptionPrefix)
	}
	w.Kind, w.DeliveryID, w.Job = platform.WebhookJob, j.DeliveryID, ev
	return w, nil
}

// hostOf is the lower-cased host of an instance URL, "" if it has none.
func hostOf(instance string) string {
	u, err := url.Parse(instance)
	if err != nil {
		return ""
	}
	return strings.ToLower(u.Host)
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

// conclusion is a completed job's conclusion in GitHub's words, which the ledger uses.
func conclusion(p Phase, status string) string {
	switch {
	case p != PhaseCompleted:
		return ""
	case status == "failed":
		return "failure"
	case status == "canceled":
		return "cancelled"
	default:
		return status
	}
}

// scopeOf turns a neutral scope into GitLab's.
func scopeOf(s platform.Scope) Scope {
	switch e := s.Effective(); {
	case e.IsRepository():
		return Scope{Project: e.Repository}
	case e.Organization != "":
		return Scope{Group: e.Organization}
	default:
		return Scope{Instance: e.Instance}
	}
}

// neutralJob is a job in the ledger's terms, its tags lower-cased as labels.
func neutralJob(j Job) platform.Job {
	return platform.Job{ID: strconv.FormatInt(j.ID, 10), RunID: strconv.FormatInt(j.PipelineID, 10), Name: j.Name,
		State: ledgerState(j.Phase), Labels: platform.NormalizeLabels(j.Tags), Repository: j.ProjectPath,
		RunnerName: strings.TrimPrefix(j.RunnerDescription, DescriptionPrefix), CreatedAt: j.CreatedAt}
}

// QueuedJobs lists the pending and held jobs of the scope's projects. A ref_protected pool's
// runners never take a job of an unprotected ref, so for such a pool those jobs are left out:
// they are no demand this pool could serve.
func (p *Platform) QueuedJobs(ctx context.Context, scope platform.Scope) ([]platform.Job, error) {
	jobs, err := p.Jobs(ctx, scopeOf(scope))
	if err != nil {
		return nil, err
	}
	protected := map[string]bool{}
	var out []platform.Job
	for _, j := range jobs {
		if j.Phase != PhaseDemand && j.Phase != PhaseHeld {
			continue
		}
		if p.settings.RefProtectedOnly() {
			key := fmt.Sprintf("%s\x00%t\x00%s", j.ProjectPath, j.Tag, j.Ref)
			ok, seen := protected[key]
			if !seen {
				if ok, err = p.RefProtected(ctx, j.ProjectPath, j.Ref, j.Tag); err != nil {
					return nil, err
				}
				protected[key] = ok
			}
			if !ok {
				continue
			}
		}
		out = append(out, neutralJob(j))
	}
	return out, nil
}

// GetJob reads one job; GitLab reads a job through its project, so scope must be the job's
// project (the Repository of its event).
func (p *Platform) GetJob(ctx context.Context, scope platform.Scope, jobID string) (platform.Job, error) {
	id, err := strconv.ParseInt(jobID, 10, 64)
	if err != nil || id <= 0 {
		return platform.Job{}, fmt.Errorf("%w: GitLab job ID %q is not a number", platform.ErrInvalid, jobID)
	}
	if !scope.IsRepository() {
		return platform.Job{}, fmt.Errorf("%w: reading GitLab job %s needs its project", platform.ErrInvalid, jobID)
	}
	j, err := p.Client.GetJob(ctx, scope.Repository, id)
	if err != nil {
		return platform.Job{}, err
	}
	return neutralJob(j), nil
}

// Register creates the VM's own runner (see Client.Register) with spec.Labels as its tags (the
// pool's tags when spec names none) and the pool's run_untagged and access level; the pool's
// mark is always among its tags.
func (p *Platform) Register(ctx context.Context, scope platform.Scope, spec platform.RunnerSpec) (platform.Registration, error) {
	s := p.settings
	if len(spec.Labels) > 0 {
		s.Tags = spec.Labels
	}
	reg, err := p.Client.Register(ctx, scopeOf(scope), spec.Name, p.mark, s)
	if err != nil {
		return platform.Registration{}, err
	}
	return platform.Registration{ID: strconv.FormatInt(reg.RunnerID, 10), Config: string(reg.Config)}, nil
}

// ListRunners lists HyperFleet's runners of the scope; those of this pool carry its mark as
// their one label (GitLab's listings do not show tags, so the pool's are listed by tag).
func (p *Platform) ListRunners(ctx context.Context, scope platform.Scope) ([]platform.Runner, error) {
	s := scopeOf(scope)
	all, err := p.Runners(ctx, s, "")
	if err != nil {
		return nil, err
	}
	marked, err := p.Runners(ctx, s, p.mark)
	if err != nil {
		return nil, err
	}
	ours := map[int64]bool{}
	for _, r := range marked {
		ours[r.ID] = true
	}
	out := make([]platform.Runner, 0, len(all))
	for _, r := range all {
		pr := platform.Runner{ID: strconv.FormatInt(r.ID, 10), Name: r.Name, Status: platform.RunnerOffline}
		if r.Online {
			pr.Status = platform.RunnerOnline
		}
		if ours[r.ID] {
			pr.Labels = []string{p.mark}
		}
		out = append(out, pr)
	}
	return out, nil
}

// RemoveRunner deletes a runner by ID; already gone is not an error, busy is ErrRunnerBusy.
func (p *Platform) RemoveRunner(ctx context.Context, _ platform.Scope, runnerID string) error {
	id, err := strconv.ParseInt(runnerID, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: GitLab runner ID %q is not a number", platform.ErrInvalid, runnerID)
	}
	return p.Deregister(ctx, id)
}

// RemoveRunnerByName deletes HyperFleet's runners of the named Machine in scope.
func (p *Platform) RemoveRunnerByName(ctx context.Context, scope platform.Scope, name string) error {
	return p.DeregisterByName(ctx, scopeOf(scope), name)
}
