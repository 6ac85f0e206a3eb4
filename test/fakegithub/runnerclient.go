package fakegithub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakeserver"
)

// ErrNoJob is returned by RunnerClient.Acquire when no queued job matches the runner.
var ErrNoJob = errors.New("no queued job matches the runner")

// RunnerClient speaks the runner protocol with a JIT config issued by the fake: it is what a fake
// runner binary (or HyperFleet's agent in fake mode) uses in place of run.sh. It authenticates as
// actions/runner does, with a client assertion signed by the config's key, on its first call.
type RunnerClient struct {
	Config     JITConfig
	httpClient *http.Client

	mu    sync.Mutex
	token string
}

// NewRunnerClient decodes an encoded_jit_config; httpClient may be nil.
func NewRunnerClient(encodedJITConfig string, httpClient *http.Client) (*RunnerClient, error) {
	cfg, err := DecodeJITConfig(encodedJITConfig)
	if err != nil {
		return nil, err
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: 30 * time.Second}
		if cfg.CA != "" {
			if httpClient.Transport, err = fakeserver.TrustingTransport([]byte(cfg.CA)); err != nil {
				return nil, fmt.Errorf("jit config CA: %w", err)
			}
		}
	}
	return &RunnerClient{Config: cfg, httpClient: httpClient}, nil
}

// accessToken returns the runner's access token, exchanging a client assertion for one first.
func (c *RunnerClient) accessToken(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token != "" {
		return c.token, nil
	}
	assertion, err := c.Config.ClientAssertion(time.Now())
	if err != nil {
		return "", err
	}
	form := url.Values{"grant_type": {"client_credentials"}, "client_assertion_type": {clientAssertionJWT}, "client_assertion": {assertion}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Config.Credentials.Data["authorizationUrl"], strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("runner %s: access token: %s: %s", c.Config.RunnerName(), resp.Status, bytes.TrimSpace(data))
	}
	var out struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.AccessToken == "" {
		return "", fmt.Errorf("runner %s: access token: no access_token in %q", c.Config.RunnerName(), data)
	}
	c.token = out.AccessToken
	return c.token, nil
}

// Online marks the runner online.
func (c *RunnerClient) Online(ctx context.Context) error {
	_, err := c.call(ctx, "online", runnerRequest{}, nil)
	return err
}

// Acquire takes one matching queued job and returns its ID, or ErrNoJob.
func (c *RunnerClient) Acquire(ctx context.Context) (int64, error) {
	var out struct {
		Job struct {
			ID int64 `json:"id"`
		} `json:"job"`
	}
	status, err := c.call(ctx, "acquire", runnerRequest{}, &out)
	if err != nil {
		return 0, err
	}
	if status == http.StatusNoContent {
		return 0, ErrNoJob
	}
	return out.Job.ID, nil
}

// Complete finishes the acquired job with a conclusion ("success" when empty); the fake then
// deletes the ephemeral runner.
func (c *RunnerClient) Complete(ctx context.Context, jobID int64, conclusion string) error {
	_, err := c.call(ctx, "complete", runnerRequest{JobID: jobID, Conclusion: conclusion}, nil)
	return err
}

// Offline deletes an idle runner, as an ephemeral runner that gives up waiting does.
func (c *RunnerClient) Offline(ctx context.Context) error {
	_, err := c.call(ctx, "offline", runnerRequest{}, nil)
	return err
}

// RunOnce comes online, polls every poll until a job can be acquired, completes it with
// "success" and returns its ID. If ctx ends first the runner goes offline and ctx's error returns.
func (c *RunnerClient) RunOnce(ctx context.Context, poll time.Duration) (int64, error) {
	if err := c.Online(ctx); err != nil {
		return 0, err
	}
	for {
		id, err := c.Acquire(ctx)
		switch {
		case err == nil:
			return id, c.Complete(ctx, id, "success")
		case ctx.Err() != nil:
			return 0, c.giveUp(ctx)
		case !errors.Is(err, ErrNoJob):
			return 0, err
		}
		select {
		case <-ctx.Done():
			return 0, c.giveUp(ctx)
		case <-time.After(poll):
		}
	}
}

// giveUp deregisters an idle runner whose wait was cancelled, as the real runner does on exit.
func (c *RunnerClient) giveUp(ctx context.Context) error {
	offCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = c.Offline(offCtx)
	return ctx.Err()
}

func (c *RunnerClient) call(ctx context.Context, verb string, req runnerRequest, out any) (int, error) {
	token, err := c.accessToken(ctx)
	if err != nil {
		return 0, err
	}
	body, _ := json.Marshal(req)
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.Config.BaseURL()+"/_fake/runner/"+verb, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.httpClient.Do(hreq)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("runner %s %s: %s: %s", c.Config.RunnerName(), verb, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, err
		}
	}
	return resp.StatusCode, nil
}
