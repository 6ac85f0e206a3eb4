package fakebuildkite

import (
	"slices"
	"strings"
	"time"
)

// Job states, as Buildkite names them.
const (
	JobPending   = "pending"
	JobWaiting   = "waiting"
	JobBlocked   = "blocked"
	JobLimited   = "limited"
	JobScheduled = "scheduled"
	JobAssigned  = "assigned"
	JobAccepted  = "accepted"
	JobRunning   = "running"
	JobFinished  = "finished"
	JobCanceled  = "canceled"
	JobExpired   = "expired"
)

// ClusterToken is a cluster agent token. Its value is shown once, in the create response.
type ClusterToken struct {
	ID          string
	Description string
	Value       string
	CreatedAt   time.Time
}

// Agent is a registered agent.
type Agent struct {
	ID              string
	Name            string
	Hostname        string
	Tags            []string // key=value
	ConnectionState string   // connected, disconnected, stopping, stopped
	TokenID         string   // the cluster token it registered with
	JobID           string   // the job it holds, if any
	JobsRun         int
	CreatedAt       time.Time
	accessToken     string
}

// Pipeline is a pipeline, created on first use.
type Pipeline struct {
	ID, Slug, Name, Repository string
	CreatedAt                  time.Time
}

// Build is a build of a pipeline; its state follows from its jobs.
type Build struct {
	ID        string
	Number    int
	Pipeline  *Pipeline
	Jobs      []*Job
	CreatedAt time.Time
	Branch    string
	Commit    string
	Message   string
}

// Job is one job of a build.
type Job struct {
	ID              string
	Type            string // script (a command step) or manual (a block step)
	Name            string
	StepKey         string
	State           string
	AgentQueryRules []string // key=value, e.g. queue=linux
	Build           *Build
	AgentID         string
	ExitStatus      *int
	CreatedAt       time.Time
	ScheduledAt     time.Time
	RunnableAt      time.Time
	StartedAt       time.Time
	FinishedAt      time.Time
	// Acquisitions counts how many agents accepted the job: one, for a job run exactly once.
	Acquisitions int
}

// Active reports whether the job has not reached an end state.
func (j *Job) Active() bool {
	switch j.State {
	case JobFinished, JobCanceled, JobExpired:
		return false
	}
	return true
}

// state derives the build's state from its jobs, as Buildkite does.
func (b *Build) state() string {
	var started, failed, active, blocked, canceled bool
	for _, j := range b.Jobs {
		switch j.State {
		case JobAssigned, JobAccepted, JobRunning:
			started, active = true, true
		case JobBlocked:
			blocked = true
		case JobCanceled:
			canceled = true
		case JobFinished:
			started = true
			if j.ExitStatus != nil && *j.ExitStatus != 0 {
				failed = true
			}
		default:
			if j.Active() {
				active = true
			}
		}
	}
	switch {
	case active && failed:
		return "failing"
	case active && started:
		return "running"
	case active:
		return "scheduled"
	case blocked:
		return "blocked"
	case canceled:
		return "canceled"
	case failed:
		return "failed"
	default:
		return "passed"
	}
}

// queueOf is the queue a job targets: its queue= rule, or "default".
func queueOf(rules []string) string {
	for _, r := range rules {
		if k, v, ok := strings.Cut(r, "="); ok && k == "queue" {
			return v
		}
	}
	return "default"
}

// agentMayRun reports whether an agent's tags satisfy a job's agent query rules: every rule
// key=value must be among the tags (a value "*" matches any value of the key), and the job's
// queue must be the agent's queue (an agent without a queue tag serves the default queue).
func agentMayRun(tags, rules []string) bool {
	if queueOf(tags) != queueOf(rules) {
		return false
	}
	for _, rule := range rules {
		k, v, _ := strings.Cut(rule, "=")
		if k == "queue" {
			continue
		}
		if !slices.ContainsFunc(tags, func(t string) bool {
			tk, tv, _ := strings.Cut(t, "=")
			return tk == k && (v == "*" || tv == v)
		}) {
			return false
		}
	}
	return true
}

func (s *Server) clusterTokenByValueLocked(v string) *ClusterToken {
	if v == "" {
		return nil
	}
	for _, t := range s.clusterToks {
		if t.Value == v {
			return t
		}
	}
	return nil
}

func (s *Server) agentByAccessTokenLocked(v string) *Agent {
	if v == "" {
		return nil
	}
	for _, a := range s.agents {
		if a.accessToken == v {
			return a
		}
	}
	return nil
}

// JobOption adjusts a job created with CreateJob.
type JobOption func(*Job)

// WithState creates the job in a state other than scheduled: waiting (behind a wait step),
// blocked, limited (a concurrency group), ...
func WithState(state string) JobOption { return func(j *Job) { j.State = state } }

// WithName names the job's step.
func WithName(name string) JobOption { return func(j *Job) { j.Name = name } }

// WithType sets the job type: "manual" is a block step.
func WithType(typ string) JobOption { return func(j *Job) { j.Type = typ } }

// CreateJob creates a one-job build of pipeline (created on first use) whose job targets the
// agents matching rules (e.g. "queue=linux", "os=linux"). A scheduled job sends job.scheduled.
func (s *Server) CreateJob(pipeline string, rules []string, opts ...JobOption) Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pipelines[pipeline]
	if p == nil {
		p = &Pipeline{ID: NewUUID(), Slug: pipeline, Name: pipeline, Repository: "git@github.com:" + s.opts.Organization + "/" + pipeline + ".git", CreatedAt: s.now()}
		s.pipelines[pipeline] = p
	}
	s.buildNumbers[pipeline]++
	now := s.now()
	b := &Build{ID: NewUUID(), Number: s.buildNumbers[pipeline], Pipeline: p, CreatedAt: now, Branch: "main", Commit: randomHex(20), Message: "Build " + pipeline}
	j := &Job{ID: NewUUID(), Type: "script", Name: "build", StepKey: "build", State: JobScheduled, AgentQueryRules: slices.Clone(rules), Build: b, CreatedAt: now}
	for _, o := range opts {
		o(j)
	}
	if j.State == JobScheduled {
		j.ScheduledAt, j.RunnableAt = now, now
	}
	b.Jobs = append(b.Jobs, j)
	s.builds = append(s.builds, b)
	s.jobs[j.ID] = j
	if j.State == JobScheduled {
		s.enqueueJobHookLocked("job.scheduled", j)
	}
	return *j
}

// Release moves a held job (waiting, blocked, limited) to scheduled, as a finished wait step,
// an unblock or a free concurrency slot does; a block step (type manual) becomes finished and
// sends job.activated instead.
func (s *Server) Release(jobID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[jobID]
	if j == nil || !j.Active() || j.State == JobScheduled {
		return
	}
	now := s.now()
	if j.Type == "manual" {
		j.State, j.FinishedAt = JobFinished, now
		s.enqueueJobHookLocked("job.activated", j)
		return
	}
	j.State, j.ScheduledAt, j.RunnableAt = JobScheduled, now, now
	s.enqueueJobHookLocked("job.scheduled", j)
}

// Cancel cancels a job that has not finished.
func (s *Server) Cancel(jobID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.jobs[jobID]; j != nil && j.Active() {
		j.State, j.FinishedAt = JobCanceled, s.now()
		s.enqueueJobHookLocked("job.finished", j)
	}
}

// Jobs returns a copy of every job, oldest first.
func (s *Server) Jobs() []Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Job
	for _, b := range s.builds {
		for _, j := range b.Jobs {
			out = append(out, *j)
		}
	}
	return out
}

// GetJob returns a copy of one job.
func (s *Server) GetJob(id string) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return Job{}, false
	}
	return *j, true
}

// ClusterTokens returns a copy of the cluster's agent tokens.
func (s *Server) ClusterTokens() []ClusterToken {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ClusterToken, 0, len(s.clusterToks))
	for _, t := range s.clusterToks {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b ClusterToken) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

// AddClusterToken creates a cluster agent token directly (as an administrator would in the
// UI) and returns it with its value, e.g. for the metrics endpoint.
func (s *Server) AddClusterToken(description string) ClusterToken {
	s.mu.Lock()
	defer s.mu.Unlock()
	return *s.addClusterTokenLocked(description)
}

func (s *Server) addClusterTokenLocked(description string) *ClusterToken {
	t := &ClusterToken{ID: NewUUID(), Description: description, Value: randomHex(25), CreatedAt: s.now()}
	s.clusterToks[t.ID] = t
	return t
}

// Agents returns a copy of every agent ever registered, connected or not.
func (s *Server) Agents() []Agent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Agent, 0, len(s.agents))
	for _, a := range s.agents {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b Agent) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}
