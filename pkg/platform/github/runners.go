package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	gh "github.com/google/go-github/v66/github"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// defaultRunnerGroupID is the "Default" runner group every repository and organization has.
const defaultRunnerGroupID = 1

// Register registers an ephemeral just-in-time runner in the Default runner group and returns its
// ID and encoded JIT config (the Registration's Config, for run.sh --jitconfig). A pool's runner
// group is applied by the Platform its PoolClients returns (RegisterInGroup). self-hosted is added to the labels because JIT runners get no default labels. A 409 means the
// name is taken; names are deterministic, so the holder is a stale runner of ours (a VM that
// died before running): it is deleted and registration retried once. A second 409 means another
// registration of the same name raced us and is returned as platform.ErrConflict.
func (c *Client) Register(ctx context.Context, scope platform.Scope, spec platform.RunnerSpec) (platform.Registration, error) {
	return c.RegisterInGroup(ctx, scope, spec, defaultRunnerGroupID)
}

// RegisterInGroup is Register into runner group groupID (0 means the Default group).
func (c *Client) RegisterInGroup(ctx context.Context, scope platform.Scope, spec platform.RunnerSpec, groupID int64) (platform.Registration, error) {
	scope = scope.Effective()
	if err := validGitHubScope(scope); err != nil {
		return platform.Registration{}, fmt.Errorf("%w: %v", platform.ErrInvalid, err)
	}
	if strings.TrimSpace(spec.Name) == "" {
		return platform.Registration{}, fmt.Errorf("%w: runner name is required", platform.ErrInvalid)
	}
	client, err := c.clientFor(ctx, scope)
	if err != nil {
		return platform.Registration{}, err
	}
	req := &gh.GenerateJITConfigRequest{
		Name:          spec.Name,
		RunnerGroupID: groupID,
		Labels:        platform.NormalizeLabels(append(append([]string(nil), spec.Labels...), platform.SelfHostedLabel)),
	}
	if req.RunnerGroupID == 0 {
		req.RunnerGroupID = defaultRunnerGroupID
	}
	if spec.WorkFolder != "" {
		req.WorkFolder = gh.String(spec.WorkFolder)
	}
	cfg, err := c.generateJIT(ctx, client, scope, req)
	if errors.Is(err, platform.ErrConflict) {
		if rmErr := c.removeRunnersNamed(ctx, client, scope, spec.Name); rmErr != nil {
			return platform.Registration{}, fmt.Errorf("runner name %q is taken and the stale runner could not be removed: %w", spec.Name, rmErr)
		}
		cfg, err = c.generateJIT(ctx, client, scope, req)
	}
	if err != nil {
		c.forgetInstallation(scope, err)
		return platform.Registration{}, err
	}
	return platform.Registration{ID: formatID(cfg.GetRunner().GetID()), Config: cfg.GetEncodedJITConfig()}, nil
}

// validGitHubScope is platform.Scope.Validate with GitHub's shape: a repository is owner/name,
// an organization a single name, and there are no instance runners.
func validGitHubScope(scope platform.Scope) error {
	if err := scope.Validate(); err != nil {
		return err
	}
	switch {
	case scope.IsRepository() && strings.Count(scope.Repository, "/") != 1:
		return fmt.Errorf("repository %q is not owner/name", scope.Repository)
	case !scope.IsRepository() && (scope.Organization == "" || strings.Contains(scope.Organization, "/")):
		return fmt.Errorf("scope needs a repository (owner/name) or an organization, not %q", scope)
	}
	return nil
}

// formatID is a GitHub numeric ID as the neutral types carry it; 0 (none) is "".
func formatID(id int64) string {
	if id == 0 {
		return ""
	}
	return strconv.FormatInt(id, 10)
}

// parseID reads a neutral ID back; anything but a positive decimal is platform.ErrInvalid.
func parseID(what, id string) (int64, error) {
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: %s %q is not a GitHub ID", platform.ErrInvalid, what, id)
	}
	return n, nil
}

func (c *Client) generateJIT(ctx context.Context, client *gh.Client, scope platform.Scope, req *gh.GenerateJITConfigRequest) (*gh.JITRunnerConfig, error) {
	var cfg *gh.JITRunnerConfig
	var resp *gh.Response
	var err error
	if scope.IsRepository() {
		owner, repo := scope.RepositoryParts()
		cfg, resp, err = client.Actions.GenerateRepoJITConfig(ctx, owner, repo, req)
	} else {
		cfg, resp, err = client.Actions.GenerateOrgJITConfig(ctx, scope.Organization, req)
	}
	if err != nil {
		return nil, classify("generate JIT config in "+scope.String(), resp, err)
	}
	if cfg.GetEncodedJITConfig() == "" {
		return nil, &platform.Error{Class: platform.ErrTransient, Op: "generate JIT config in " + scope.String(), Err: errors.New("empty encoded_jit_config")}
	}
	return cfg, nil
}

// ListRunners lists every runner in scope, following pagination.
func (c *Client) ListRunners(ctx context.Context, scope platform.Scope) ([]platform.Runner, error) {
	scope = scope.Effective()
	client, err := c.clientFor(ctx, scope)
	if err != nil {
		return nil, err
	}
	runners, err := c.listRunners(ctx, client, scope, "")
	c.forgetInstallation(scope, err)
	return runners, err
}

func (c *Client) listRunners(ctx context.Context, client *gh.Client, scope platform.Scope, name string) ([]platform.Runner, error) {
	opts := &gh.ListRunnersOptions{ListOptions: gh.ListOptions{PerPage: 100}}
	if name != "" {
		opts.Name = gh.String(name)
	}
	var out []platform.Runner
	for {
		var page *gh.Runners
		var resp *gh.Response
		var err error
		if scope.IsRepository() {
			owner, repo := scope.RepositoryParts()
			page, resp, err = client.Actions.ListRunners(ctx, owner, repo, opts)
		} else {
			page, resp, err = client.Actions.ListOrganizationRunners(ctx, scope.Organization, opts)
		}
		if err != nil {
			return nil, classify("list runners in "+scope.String(), resp, err)
		}
		for _, r := range page.Runners {
			out = append(out, toRunner(r))
		}
		if resp.NextPage == 0 {
			return out, nil
		}
		opts.Page = resp.NextPage
	}
}

func toRunner(r *gh.Runner) platform.Runner {
	labels := make([]string, 0, len(r.Labels))
	for _, l := range r.Labels {
		labels = append(labels, l.GetName())
	}
	return platform.Runner{
		ID: formatID(r.GetID()), Name: r.GetName(), Labels: platform.NormalizeLabels(labels),
		Status: platform.RunnerStatus(r.GetStatus()), Busy: r.GetBusy(),
	}
}

// RemoveRunner deregisters a runner. A runner already gone is success (removal is retried by
// reconcilers); a busy runner yields platform.ErrRunnerBusy.
func (c *Client) RemoveRunner(ctx context.Context, scope platform.Scope, runnerID string) error {
	scope = scope.Effective()
	id, err := parseID("runner ID", runnerID)
	if err != nil {
		return err
	}
	client, err := c.clientFor(ctx, scope)
	if err != nil {
		return err
	}
	err = c.removeRunner(ctx, client, scope, id)
	c.forgetInstallation(scope, err)
	return err
}

// RemoveRunnerByName removes the runners named name in scope (normally zero or one), for
// deleting a Machine's runner when only its deterministic name is known.
func (c *Client) RemoveRunnerByName(ctx context.Context, scope platform.Scope, name string) error {
	scope = scope.Effective()
	client, err := c.clientFor(ctx, scope)
	if err != nil {
		return err
	}
	return c.removeRunnersNamed(ctx, client, scope, name)
}

func (c *Client) removeRunnersNamed(ctx context.Context, client *gh.Client, scope platform.Scope, name string) error {
	runners, err := c.listRunners(ctx, client, scope, name)
	if err != nil {
		return err
	}
	for _, r := range runners {
		// The name filter is server-side on GitHub; re-check in case a server ignores it.
		if !strings.EqualFold(r.Name, name) {
			continue
		}
		id, err := parseID("runner ID", r.ID)
		if err != nil {
			return err
		}
		if err := c.removeRunner(ctx, client, scope, id); err != nil {
			return err
		}
	}
	return nil
}

func (c *Client) removeRunner(ctx context.Context, client *gh.Client, scope platform.Scope, runnerID int64) error {
	var resp *gh.Response
	var err error
	if scope.IsRepository() {
		owner, repo := scope.RepositoryParts()
		resp, err = client.Actions.RemoveRunner(ctx, owner, repo, runnerID)
	} else {
		resp, err = client.Actions.RemoveOrganizationRunner(ctx, scope.Organization, runnerID)
	}
	err = classify(fmt.Sprintf("remove runner %d from %s", runnerID, scope), resp, err)
	switch {
	case errors.Is(err, platform.ErrNotFound):
		return nil
	case errors.Is(err, platform.ErrInvalid) && resp != nil && resp.StatusCode == http.StatusUnprocessableEntity:
		// GitHub answers 422 "Runner ... is still running a job".
		var pe *platform.Error
		if errors.As(err, &pe) {
			pe.Class = platform.ErrRunnerBusy
		}
	}
	return err
}
