package fakegithub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/fakeserver"
)

// ErrNoJob is returned by RunnerClient.Acquire when no queued job matches the runner.
var ErrNoJob = errors.New("no queued job matches the runner")

// RunnerClient speaks the /_fake/ runner protocol with a JIT config issued by the fake: it is
// what a fake runner binary (or HyperFleet's agent in fake mode) uses in place of run.sh.
type RunnerClient struct {
	Config     JITConfig
	encoded    string
	httpClient *http.Client
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
	return &RunnerClient{Config: cfg, encoded: encodedJITConfig, httpClient: httpClient}, nil
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
	req.JITConfig = c.encoded
	body, _ := json.Marshal(req)
	url := strings.TrimRight(c.Config.URL, "/") + "/_fake/runner/" + verb
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := c.httpClient.Do(hreq)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("runner %s %s: %s: %s", c.Config.RunnerName, verb, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, err
		}
	}
	return resp.StatusCode, nil
}
