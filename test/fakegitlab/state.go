package fakegitlab

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// JobStatus is a CI job's status, as GitLab names it.
type JobStatus string

// Every job status GitLab documents.
const (
	JobCreated            JobStatus = "created"
	JobWaitingForResource JobStatus = "waiting_for_resource"
	JobPreparing          JobStatus = "preparing"
	JobPending            JobStatus = "pending"
	JobRunning            JobStatus = "running"
	JobSuccess            JobStatus = "success"
	JobFailed             JobStatus = "failed"
	JobCanceled           JobStatus = "canceled"
	JobSkipped            JobStatus = "skipped"
	JobManual             JobStatus = "manual"
	JobScheduled          JobStatus = "scheduled"
)

// Finished reports whether a job in this status will never run again.
func (s JobStatus) Finished() bool {
	return s == JobSuccess || s == JobFailed || s == JobCanceled || s == JobSkipped
}

// Runner types and access levels, as the runners API names them.
const (
	InstanceType = "instance_type"
	GroupType    = "group_type"
	ProjectType  = "project_type"

	AccessNotProtected = "not_protected"
	AccessRefProtected = "ref_protected"
)

// Group is a GitLab group; FullPath is "parent/child".
type Group struct {
	ID       int64
	FullPath string
	ParentID int64
}

// Project is a GitLab project; its namespace is the group it lives in.
type Project struct {
	ID                int64
	PathWithNamespace string
	GroupID           int64
	// ProtectedBranches and ProtectedTags are name patterns ("main", "release/*").
	ProtectedBranches []string
	ProtectedTags     []string
	// CreatedAt orders the project listings, newest first by default.
	CreatedAt time.Time
}

// Runner is a runner created through POST /user/runners.
type Runner struct {
	ID             int64
	Token          string // glrt-...
	TokenExpiresAt time.Time
	Type           string
	GroupID        int64
	ProjectID      int64
	Description    string
	Tags           []string
	RunUntagged    bool
	AccessLevel    string
	Paused         bool
	Locked         bool
	ContactedAt    time.Time
	CreatedAt      time.Time
	// JobsRun counts jobs handed to the runner.
	JobsRun int
}

// Online reports whether the runner contacted GitLab in the last two hours, GitLab's rule.
func (r *Runner) Online(now time.Time) bool {
	return !r.ContactedAt.IsZero() && now.Sub(r.ContactedAt) < 2*time.Hour
}

// staleAfter is how long GitLab waits before calling a silent runner stale.
const staleAfter = 7 * 24 * time.Hour

// Status is online, offline, stale or never_contacted, GitLab's rule: stale once the runner
// has been silent for seven days, or was created that long ago and never contacted
// (docs.gitlab.com/api/runners/#list-owned-runners).
func (r *Runner) Status(now time.Time) string {
	switch {
	case r.ContactedAt.IsZero() && !r.CreatedAt.IsZero() && now.Sub(r.CreatedAt) >= staleAfter:
		return "stale"
	case r.ContactedAt.IsZero():
		return "never_contacted"
	case r.Online(now):
		return "online"
	case now.Sub(r.ContactedAt) >= staleAfter:
		return "stale"
	default:
		return "offline"
	}
}

// Job is one CI job of a pipeline.
type Job struct {
	ID         int64
	ProjectID  int64
	PipelineID int64
	Name       string
	Stage      string
	Ref        string
	Tag        bool // the ref is a tag
	SHA        string
	Tags       []string
	// Protected is fixed when the job is created, from the project's protected branches or
	// tags, as GitLab does.
	Protected bool
	Status    JobStatus
	Token     string // the job token the runner updates the job with
	RunnerID  int64
	// RunnerDescription is its runner's description when it took the job, kept after the
	// runner is deleted.
	RunnerDescription string
	FailureReason     string
	CreatedAt         time.Time
	StartedAt         time.Time
	FinishedAt        time.Time
	// Acquisitions counts how often a runner was handed the job; a correct fleet makes it 1.
	Acquisitions int
}

// JobSpec describes a job to create.
type JobSpec struct {
	Name  string // default "build"
	Stage string // default "test"
	Ref   string // default "main"
	Tag   bool
	Tags  []string
	// Status is the job's first status; default pending. created, manual, scheduled,
	// waiting_for_resource make a held job that SetJobStatus releases.
	Status JobStatus
}

// groupLocked finds a group by numeric ID or full path.
func (s *Server) groupLocked(id string) *Group {
	if n, err := strconv.ParseInt(id, 10, 64); err == nil {
		return s.groups[n]
	}
	for _, g := range s.groups {
		if strings.EqualFold(g.FullPath, id) {
			return g
		}
	}
	return nil
}

// projectLocked finds a project by numeric ID or path with namespace.
func (s *Server) projectLocked(id string) *Project {
	if n, err := strconv.ParseInt(id, 10, 64); err == nil {
		return s.projects[n]
	}
	for _, p := range s.projects {
		if strings.EqualFold(p.PathWithNamespace, id) {
			return p
		}
	}
	return nil
}

// inGroupLocked reports whether group gid is ancestor (or itself) of group child.
func (s *Server) inGroupLocked(gid, child int64) bool {
	for id := child; id != 0; {
		if id == gid {
			return true
		}
		g := s.groups[id]
		if g == nil {
			return false
		}
		id = g.ParentID
	}
	return false
}

// refProtected applies the project's protected branch or tag patterns to a ref; * matches any
// run of characters, as in GitLab's wildcard protected branches.
func refProtected(p *Project, ref string, tag bool) bool {
	patterns := p.ProtectedBranches
	if tag {
		patterns = p.ProtectedTags
	}
	for _, pat := range patterns {
		if wildcardMatch(pat, ref) {
			return true
		}
	}
	return false
}

func wildcardMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	last := parts[len(parts)-1]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}

// canPickLocked is GitLab's rule for offering a pending job to a runner: the runner is not
// paused; it serves the job's project (instance runners serve every project, group runners
// the projects of their group and its subgroups, project runners their project); a runner
// with access level ref_protected takes only jobs of protected refs; and the runner has every
// tag of the job, or, for a job without tags, run_untagged is set.
func (s *Server) canPickLocked(r *Runner, j *Job) bool {
	if r.Paused || j.Status != JobPending {
		return false
	}
	p := s.projects[j.ProjectID]
	if p == nil {
		return false
	}
	switch r.Type {
	case InstanceType:
	case GroupType:
		if !s.inGroupLocked(r.GroupID, p.GroupID) {
			return false
		}
	case ProjectType:
		if r.ProjectID != p.ID {
			return false
		}
	default:
		return false
	}
	if r.AccessLevel == AccessRefProtected && !j.Protected {
		return false
	}
	if len(j.Tags) == 0 {
		return r.RunUntagged
	}
	// Tags are case-insensitive in GitLab ("Linux" and "linux" are one tag).
	for _, t := range j.Tags {
		if !slices.ContainsFunc(r.Tags, func(have string) bool { return strings.EqualFold(have, t) }) {
			return false
		}
	}
	return true
}

// setStatusLocked moves a job to a status, stamps its times and queues a Job Hook.
func (s *Server) setStatusLocked(j *Job, st JobStatus) {
	if j.Status == st {
		return
	}
	now := s.now()
	j.Status = st
	switch {
	case st == JobRunning && j.StartedAt.IsZero():
		j.StartedAt = now
	case st.Finished():
		j.FinishedAt = now
	}
	s.enqueueJobHookLocked(j)
}
