package buildkite

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	bk "github.com/buildkite/go-buildkite/v4"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Job is a command job as the builds API reports it.
type Job struct {
	ID          string
	Name        string
	State       string
	Phase       Phase
	Rules       []string
	Pipeline    string
	BuildNumber int
	AgentName   string
	CreatedAt   time.Time
}

// activeBuildStates are the build states in which a job may still wait for or hold an agent.
var activeBuildStates = []string{"scheduled", "running", "failing"}

// Jobs lists the organization's unfinished command jobs (demand, held and in progress) from
// the builds of the active states, newest builds first, at most maxPages pages of 100 builds.
// It repairs what missed webhooks did not tell: the caller keeps the ones whose rules its
// pool's tags match (Tags.Matches) and counts only PhaseDemand as demand.
func (c *Client) Jobs(ctx context.Context) ([]Job, error) {
	var out []Job
	opt := &bk.BuildsListOptions{State: activeBuildStates, ListOptions: bk.ListOptions{PerPage: 100}}
	for range maxPages {
		builds, resp, err := c.bk.Builds.ListByOrg(ctx, c.cfg.Organization, opt)
		if err != nil {
			return nil, classify("list builds", err)
		}
		for _, b := range builds {
			for _, j := range b.Jobs {
				phase, known := PhaseOf(j.State)
				if !known || !NeedsAgent(j.Type) || phase == PhaseCompleted {
					continue
				}
				job := Job{ID: j.ID, Name: j.Name, State: j.State, Phase: phase, Rules: j.AgentQueryRules,
					BuildNumber: b.Number, AgentName: j.Agent.Name, CreatedAt: timeOf(j.CreatedAt)}
				if b.Pipeline != nil {
					job.Pipeline = b.Pipeline.Slug
				}
				out = append(out, job)
			}
		}
		if resp == nil || resp.NextPage == 0 {
			break
		}
		opt.Page = resp.NextPage
	}
	return out, nil
}

// GetJob reads one job of a build.
func (c *Client) GetJob(ctx context.Context, pipeline string, buildNumber int, jobID string) (Job, error) {
	b, _, err := c.bk.Builds.Get(ctx, c.cfg.Organization, pipeline, fmt.Sprint(buildNumber), nil)
	if err != nil {
		return Job{}, classify(fmt.Sprintf("get build %s#%d", pipeline, buildNumber), err)
	}
	for _, j := range b.Jobs {
		if j.ID == jobID {
			phase, _ := PhaseOf(j.State)
			return Job{ID: j.ID, Name: j.Name, State: j.State, Phase: phase, Rules: j.AgentQueryRules, Pipeline: pipeline,
				BuildNumber: b.Number, AgentName: j.Agent.Name, CreatedAt: timeOf(j.CreatedAt)}, nil
		}
	}
	return Job{}, &platform.Error{Class: platform.ErrNotFound, Op: "get job " + jobID, StatusCode: http.StatusNotFound,
		Err: fmt.Errorf("build %s#%d has no job %s", pipeline, buildNumber, jobID)}
}

// QueueMetrics are one queue's job counts from the agent metrics endpoint.
type QueueMetrics struct {
	Scheduled int `json:"scheduled"`
	Running   int `json:"running"`
	Waiting   int `json:"waiting"`
	Total     int `json:"total"`
}

// Metrics reads the cluster's job counts per queue from the agent API's metrics endpoint
// (GET /v3/metrics, Authorization: Token <agent token>), one cheap request that needs no API
// scope: a cross-check of the ledger's totals per queue. go-buildkite has no client for it.
func (c *Client) Metrics(ctx context.Context, agentToken string) (map[string]QueueMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.AgentEndpoint+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Token "+agentToken)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, classify("read agent metrics", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return nil, &platform.Error{Class: classifyStatus(resp.StatusCode), Op: "read agent metrics", StatusCode: resp.StatusCode,
			Err: fmt.Errorf("%s", http.StatusText(resp.StatusCode))}
	}
	var m struct {
		Jobs struct {
			Queues map[string]QueueMetrics `json:"queues"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, &platform.Error{Class: platform.ErrTransient, Op: "read agent metrics", Err: err}
	}
	return m.Jobs.Queues, nil
}
