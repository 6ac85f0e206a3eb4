package fakegitlab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// RunnerClient speaks the runner's side of the job protocol, as gitlab-runner does: request
// a job with the runner authentication token, then update it with the job token.
type RunnerClient struct {
	// URL is the instance root (gitlab-runner's --url).
	URL   string
	Token string
	HTTP  *http.Client
}

// RunnerJob is the part of a handed-out job a one-job runner needs.
type RunnerJob struct {
	ID      int64  `json:"id"`
	Token   string `json:"token"`
	JobInfo struct {
		Name        string `json:"name"`
		Stage       string `json:"stage"`
		ProjectID   int64  `json:"project_id"`
		ProjectName string `json:"project_name"`
	} `json:"job_info"`
	GitInfo struct {
		RepoURL string `json:"repo_url"`
		Ref     string `json:"ref"`
		SHA     string `json:"sha"`
	} `json:"git_info"`
	Variables []struct {
		Key   string `json:"key"`
		Value string `json:"value"`
	} `json:"variables"`
	Steps []struct {
		Name   string   `json:"name"`
		Script []string `json:"script"`
	} `json:"steps"`
}

// Variable returns a job variable's value.
func (j *RunnerJob) Variable(key string) string {
	for _, v := range j.Variables {
		if v.Key == key {
			return v.Value
		}
	}
	return ""
}

// StatusError is a non-success answer of the runner endpoints.
type StatusError struct {
	StatusCode int
	Body       string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("GitLab answered %d: %s", e.StatusCode, strings.TrimSpace(e.Body))
}

func (c *RunnerClient) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	data, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.URL, "/")+"/api/v4"+path, bytes.NewReader(data))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "gitlab-runner 17.11.0 (fake)")
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, out, err
}

// RequestJob asks for a job once: the job, or nil when GitLab has none for this runner (204).
func (c *RunnerClient) RequestJob(ctx context.Context) (*RunnerJob, error) {
	status, body, err := c.do(ctx, http.MethodPost, "/jobs/request", map[string]any{
		"token": c.Token, "info": map[string]any{"name": "gitlab-runner", "executor": "shell", "features": map[string]bool{}},
	})
	switch {
	case err != nil:
		return nil, err
	case status == http.StatusNoContent:
		return nil, nil
	case status != http.StatusCreated:
		return nil, &StatusError{StatusCode: status, Body: string(body)}
	}
	var j RunnerJob
	if err := json.Unmarshal(body, &j); err != nil {
		return nil, fmt.Errorf("job payload: %w", err)
	}
	return &j, nil
}

// UpdateJob reports a job's state (running, success, failed) with its job token.
func (c *RunnerClient) UpdateJob(ctx context.Context, j *RunnerJob, state string) error {
	status, body, err := c.do(ctx, http.MethodPut, "/jobs/"+strconv.FormatInt(j.ID, 10), map[string]any{
		"token": j.Token, "state": state,
	})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return &StatusError{StatusCode: status, Body: string(body)}
	}
	return nil
}

// Unregister deletes the runner with its own token (DELETE /runners), as
// gitlab-runner unregister does.
func (c *RunnerClient) Unregister(ctx context.Context) error {
	status, body, err := c.do(ctx, http.MethodDelete, "/runners", map[string]any{"token": c.Token})
	if err != nil {
		return err
	}
	if status != http.StatusNoContent {
		return &StatusError{StatusCode: status, Body: string(body)}
	}
	return nil
}
