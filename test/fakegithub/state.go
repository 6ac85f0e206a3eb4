package fakegithub

import (
	"crypto/rsa"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Job states and the runner statuses the fake reports, as GitHub spells them.
const (
	JobQueued     = "queued"
	JobInProgress = "in_progress"
	JobCompleted  = "completed"

	RunnerOnline  = "online"
	RunnerOffline = "offline"
)

// Job is the fake's record of one workflow job. RunnerID and RunnerName name the runner that
// acquired it; Acquisitions counts how many times a runner acquired it, which must be one.
type Job struct {
	ID           int64
	RunID        int64
	Repository   string // owner/name
	Name         string
	WorkflowName string
	Labels       []string
	Status       string
	Conclusion   string
	RunnerID     int64
	RunnerName   string
	Acquisitions int
	CreatedAt    time.Time
	StartedAt    time.Time
	CompletedAt  time.Time
}

// Runner is a self-hosted runner registered in a repository ("owner/name") or organization scope.
// JIT runners are ephemeral: once their job completes or they go offline they are deleted.
type Runner struct {
	ID            int64
	Name          string
	Scope         string
	Labels        []string
	RunnerGroupID int64
	WorkFolder    string
	Status        string
	Busy          bool
	JobID         int64 // the job this runner acquired, 0 if none
	CreatedAt     time.Time
	clientID      string         // the OAuth client ID in the runner's .credentials
	key           *rsa.PublicKey // verifies the runner's client assertions
	accessToken   string         // authenticates the runner protocol; issued for a client assertion
}

// Installation is one installation of the fake App on an account (organization).
type Installation struct {
	ID      int64
	Account string
}

type installToken struct {
	installationID int64
	expiresAt      time.Time
	revoked        bool
}

type rateBucket struct {
	remaining int
	resetAt   time.Time
}

func splitRepo(repo string) (owner, name string, ok bool) {
	owner, name, ok = strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return owner, name, true
}

// scopeOwner returns the account a scope ("owner/name" or "org") belongs to.
func scopeOwner(scope string) string {
	owner, _, _ := strings.Cut(scope, "/")
	return owner
}

func sameScope(a, b string) bool { return strings.EqualFold(a, b) }

func cloneJob(j *Job) Job {
	c := *j
	c.Labels = append([]string(nil), j.Labels...)
	return c
}

func cloneRunner(r *Runner) Runner {
	c := *r
	c.Labels = append([]string(nil), r.Labels...)
	c.accessToken, c.key = "", nil
	return c
}

// Jobs returns a snapshot of every job created, ordered by ID.
func (s *Server) Jobs() []Job {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Job, 0, len(s.jobs))
	for _, j := range s.jobs {
		out = append(out, cloneJob(j))
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out
}

// Job returns one job by ID.
func (s *Server) Job(id int64) (Job, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return Job{}, false
	}
	return cloneJob(j), true
}

// Runners returns a snapshot of the currently registered runners (all scopes), ordered by ID.
func (s *Server) Runners() []Runner {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Runner, 0, len(s.runners))
	for _, r := range s.runners {
		out = append(out, cloneRunner(r))
	}
	sort.Slice(out, func(i, k int) bool { return out[i].ID < out[k].ID })
	return out
}

// VerifyEachJobRanOnce returns an error naming every job that is not completed by exactly one
// runner acquisition: the "one job, one runner" invariant HyperFleet must keep. Cancelled jobs
// never ran and are exempt.
func (s *Server) VerifyEachJobRanOnce() error {
	var problems []string
	for _, j := range s.Jobs() {
		switch {
		case j.Conclusion == "cancelled" && j.Acquisitions == 0:
		case j.Acquisitions != 1:
			problems = append(problems, fmt.Sprintf("job %d (%s %v) acquired %d times", j.ID, j.Repository, j.Labels, j.Acquisitions))
		case j.Status != JobCompleted:
			problems = append(problems, fmt.Sprintf("job %d (%s %v) is %s", j.ID, j.Repository, j.Labels, j.Status))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("jobs not run exactly once: %s", strings.Join(problems, "; "))
	}
	return nil
}

// labelsContainAll reports whether have contains every label in want, ignoring case, the rule
// GitHub uses to route a job to a runner.
func labelsContainAll(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			if strings.EqualFold(h, w) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// runnerMayRun reports whether a runner registered in runnerScope may take a job of repo:
// repository runners serve their repository, organization runners every repository of the org.
func runnerMayRun(runnerScope, repo string) bool {
	if strings.Contains(runnerScope, "/") {
		return sameScope(runnerScope, repo)
	}
	return sameScope(runnerScope, scopeOwner(repo))
}
