package fakegitlab

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakeserver"
)

// Delivery records one webhook the fake sent (or tried to send).
type Delivery struct {
	JobID      int64
	Status     JobStatus
	StatusCode int    // the receiver's answer, 0 if it could not be reached
	Err        string // transport error, if any
	Payload    []byte
	At         time.Time
}

// PostJobHook sends body as a GitLab Job Hook to url with the headers GitLab sets: the event
// name, the webhook's secret token in X-Gitlab-Token, a fresh event UUID and the sending
// instance's URL.
func PostJobHook(ctx context.Context, client *http.Client, url, token, instance string, body []byte) (int, error) {
	h := http.Header{}
	h.Set("User-Agent", "GitLab/17.11.0")
	h.Set("X-Gitlab-Event", "Job Hook")
	h.Set("X-Gitlab-Event-UUID", newUUID())
	h.Set("X-Gitlab-Webhook-UUID", "7c2a6f0e-2a1f-4f57-9a46-3c2b1d0e9f10")
	h.Set("X-Gitlab-Instance", instance)
	if token != "" {
		h.Set("X-Gitlab-Token", token)
	}
	return fakeserver.PostJSON(ctx, client, url, h, body)
}

func newUUID() string {
	h := randomHex(16)
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}

// hookTime is the date format of webhook payloads ("2021-02-23 02:41:37 UTC"), null when unset.
func hookTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format("2006-01-02 15:04:05 MST")
}

// jobHookPayloadLocked is the JobEvent GitLab sends: object_kind "build", the build_* fields,
// the project, the commit, and the runner once one has the job (its tags are the runner's,
// not the job's: a Job Hook does not carry the job's tags).
func (s *Server) jobHookPayloadLocked(j *Job) map[string]any {
	p := s.projects[j.ProjectID]
	now := s.now()
	var duration, queued any
	if !j.StartedAt.IsZero() {
		end := j.FinishedAt
		if end.IsZero() {
			end = now
		}
		duration = end.Sub(j.StartedAt).Seconds()
		queued = j.StartedAt.Sub(j.CreatedAt).Seconds()
	} else if j.Status == JobPending {
		queued = now.Sub(j.CreatedAt).Seconds()
	}
	var runner any
	if run := s.runners[j.RunnerID]; run != nil {
		runner = map[string]any{"id": run.ID, "description": run.Description, "runner_type": run.Type,
			"active": !run.Paused, "is_shared": run.Type == InstanceType, "tags": nonNil(run.Tags)}
	}
	name := p.PathWithNamespace[strings.LastIndex(p.PathWithNamespace, "/")+1:]
	return map[string]any{
		"object_kind": "build", "ref": j.Ref, "tag": j.Tag, "before_sha": strings.Repeat("0", 40), "sha": j.SHA,
		"build_id": j.ID, "build_name": j.Name, "build_stage": j.Stage, "build_status": string(j.Status),
		"build_created_at": hookTime(j.CreatedAt), "build_started_at": hookTime(j.StartedAt),
		"build_finished_at": hookTime(j.FinishedAt), "build_duration": duration, "build_queued_duration": queued,
		"build_allow_failure": false, "build_failure_reason": orUnknown(j.FailureReason), "retries_count": 0,
		"pipeline_id": j.PipelineID, "project_id": p.ID,
		"project_name": strings.ReplaceAll(p.PathWithNamespace, "/", " / "),
		"user": map[string]any{"id": 1, "name": "Administrator", "username": "root",
			"avatar_url": "", "email": "[REDACTED]"},
		"commit": map[string]any{"id": j.PipelineID, "name": nil, "sha": j.SHA, "message": "Update .gitlab-ci.yml\n",
			"author_name": "Administrator", "author_email": "admin@example.com", "author_url": s.URL() + "/root",
			"status": string(j.Status), "duration": nil, "started_at": hookTime(j.StartedAt),
			"finished_at": hookTime(j.FinishedAt)},
		"repository": map[string]any{"name": name, "url": s.URL() + "/" + p.PathWithNamespace + ".git", "description": "",
			"homepage": s.URL() + "/" + p.PathWithNamespace, "git_http_url": s.URL() + "/" + p.PathWithNamespace + ".git",
			"git_ssh_url": "git@example.com:" + p.PathWithNamespace + ".git", "visibility_level": 0},
		"project": map[string]any{"id": p.ID, "name": name, "description": "", "web_url": s.URL() + "/" + p.PathWithNamespace,
			"avatar_url": nil, "git_ssh_url": "git@example.com:" + p.PathWithNamespace + ".git",
			"git_http_url": s.URL() + "/" + p.PathWithNamespace + ".git", "namespace": s.groups[p.GroupID].FullPath,
			"visibility_level": 0, "path_with_namespace": p.PathWithNamespace, "default_branch": "main", "ci_config_path": nil},
		"runner":      runner,
		"environment": nil,
	}
}

func orUnknown(reason string) string {
	if reason == "" {
		return "unknown_failure"
	}
	return reason
}

// Deliveries returns the webhooks sent so far, in order.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.deliveries...)
}

// enqueueJobHookLocked queues a Job Hook for j's current status; the caller holds s.mu.
func (s *Server) enqueueJobHookLocked(j *Job) {
	if s.opts.WebhookURL == "" {
		return
	}
	body, _ := json.Marshal(s.jobHookPayloadLocked(j))
	s.hooks.Push(pendingHook{url: s.opts.WebhookURL, token: s.opts.WebhookToken,
		delivery: Delivery{JobID: j.ID, Status: j.Status, Payload: body}})
}

type pendingHook struct {
	url, token string
	delivery   Delivery
}

// sendHook delivers one queued Job Hook and records the delivery.
func (s *Server) sendHook(ctx context.Context, h pendingHook) {
	d := h.delivery
	status, err := PostJobHook(ctx, s.opts.WebhookClient, h.url, h.token, s.URL(), d.Payload)
	d.StatusCode, d.At = status, time.Now()
	if err != nil {
		d.Err = err.Error()
	}
	s.mu.Lock()
	s.deliveries = append(s.deliveries, d)
	s.mu.Unlock()
}

// JobHook returns the Job Hook GitLab would send for job id were it in status, without sending
// it or changing the job: what a sender of forged or stale hooks (anyone with the webhook's
// token) posts with PostJobHook. ok is false for an unknown job.
func (s *Server) JobHook(id int64, status JobStatus) (body []byte, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.jobs[id]
	if j == nil {
		return nil, false
	}
	forged := *j
	forged.Status = status
	body, _ = json.Marshal(s.jobHookPayloadLocked(&forged))
	return body, true
}
