package fakebuildkite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// AgentClient speaks the agent API (/v3) the way buildkite-agent does, for the fake agent
// binary and tests: register with an agent token, connect, ping for a job, accept, start,
// finish, disconnect.
type AgentClient struct {
	Endpoint    string // e.g. https://127.0.0.1:8443/v3
	HTTPClient  *http.Client
	AgentID     string
	accessToken string
}

// AgentJob is a job the agent API handed out.
type AgentJob struct {
	ID  string            `json:"id"`
	Env map[string]string `json:"env"`
}

// NewAgentClient returns a client for endpoint; httpClient nil means a 30 s default client.
func NewAgentClient(endpoint string, httpClient *http.Client) *AgentClient {
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 30 * time.Second}
	}
	return &AgentClient{Endpoint: strings.TrimRight(endpoint, "/"), HTTPClient: httpClient}
}

// Register registers an agent named name with tags (key=value) using an agent token and
// keeps the access token the API returns for every later call.
func (c *AgentClient) Register(ctx context.Context, token, name string, tags []string) error {
	hostname := name
	var out struct {
		ID          string `json:"id"`
		AccessToken string `json:"access_token"`
	}
	if err := c.call(ctx, http.MethodPost, "register", token, map[string]any{"name": name, "hostname": hostname, "meta_data": tags}, &out); err != nil {
		return err
	}
	c.AgentID, c.accessToken = out.ID, out.AccessToken
	return c.call(ctx, http.MethodPost, "connect", c.accessToken, nil, nil)
}

// ErrDisconnectRequested is returned by Ping when Buildkite asked the agent to stop.
var ErrDisconnectRequested = fmt.Errorf("buildkite asked the agent to disconnect")

// Ping asks for work: a job, nil when there is none, or ErrDisconnectRequested.
func (c *AgentClient) Ping(ctx context.Context) (*AgentJob, error) {
	var out struct {
		Action string    `json:"action"`
		Job    *AgentJob `json:"job"`
	}
	if err := c.call(ctx, http.MethodGet, "ping", c.accessToken, nil, &out); err != nil {
		return nil, err
	}
	if out.Action == "disconnect" {
		return nil, ErrDisconnectRequested
	}
	return out.Job, nil
}

// Accept, Start and Finish move a job through its run; Finish reports the exit status.
func (c *AgentClient) Accept(ctx context.Context, jobID string) error {
	return c.call(ctx, http.MethodPut, "jobs/"+jobID+"/accept", c.accessToken, nil, nil)
}

// Start marks the accepted job running.
func (c *AgentClient) Start(ctx context.Context, jobID string) error {
	return c.call(ctx, http.MethodPut, "jobs/"+jobID+"/start", c.accessToken, map[string]any{"started_at": time.Now().UTC().Format(time.RFC3339)}, nil)
}

// Finish reports the job's exit status.
func (c *AgentClient) Finish(ctx context.Context, jobID string, exitStatus int) error {
	return c.call(ctx, http.MethodPut, "jobs/"+jobID+"/finish", c.accessToken,
		map[string]any{"exit_status": fmt.Sprint(exitStatus), "finished_at": time.Now().UTC().Format(time.RFC3339), "chunks_failed_count": 0}, nil)
}

// Disconnect tells the API the agent is leaving.
func (c *AgentClient) Disconnect(ctx context.Context) error {
	return c.call(ctx, http.MethodPost, "disconnect", c.accessToken, nil, nil)
}

func (c *AgentClient) call(ctx context.Context, method, path, token string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, _ := json.Marshal(in)
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Endpoint+"/"+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Token "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "buildkite-agent/3.0.0 (linux; amd64)")
	resp, err := c.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("agent API %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil && len(bytes.TrimSpace(data)) > 0 {
		return json.Unmarshal(data, out)
	}
	return nil
}
