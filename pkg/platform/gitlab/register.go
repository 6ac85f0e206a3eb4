package gitlab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// DescriptionPrefix starts the description of every runner HyperFleet creates; the rest is
// the Machine's name, so an operator sees in GitLab which VM a runner is, and HyperFleet finds
// its leftovers.
const DescriptionPrefix = "HyperFleet runner "

// RunnerConfig is what a VM receives, once, from the bootstrap service: enough to run
// `gitlab-runner run-single --url URL --token TOKEN --executor shell --max-builds 1`.
type RunnerConfig struct {
	URL   string `json:"url"`
	Token string `json:"token"`
	// CA is the PEM bundle of a private instance's CA, for the runner's TLS trust (the agent
	// hands it to gitlab-runner as CI_SERVER_TLS_CA_FILE).
	CA string `json:"ca,omitempty"`
}

// Registration is a VM's runner: its ID, kept to delete it when the VM goes, and the config
// JSON (RunnerConfig) handed to the VM; the token is in the config only.
type Registration struct {
	RunnerID int64
	Config   []byte
}

// Register creates a runner for one VM (name is its Machine's name, unique and deterministic)
// in scope, with the pool's settings and mark (platform.PoolRunnerLabel, added to its tags so
// the runners of one pool can be told apart), and returns the registration. A runner left
// over from an earlier attempt for the same name is ours and its token cannot be read back
// (GitLab shows it only once), so it is deleted first: a retry after a crash leaves no orphan.
// Callers must not register one name from two places at once.
func (c *Client) Register(ctx context.Context, scope Scope, name, mark string, s RunnerSettings) (Registration, error) {
	if strings.TrimSpace(name) == "" {
		return Registration{}, fmt.Errorf("%w: a runner needs a name", platform.ErrInvalid)
	}
	if len(s.Tags) == 0 && !s.RunUntagged {
		return Registration{}, fmt.Errorf("%w: a runner without tags must run untagged jobs, or it takes none", platform.ErrInvalid)
	}
	if err := scope.Validate(); err != nil {
		return Registration{}, fmt.Errorf("%w: %v", platform.ErrInvalid, err)
	}
	if err := c.DeregisterByName(ctx, scope, name); err != nil {
		return Registration{}, err
	}
	tags := slices.Clone(s.Tags)
	if mark != "" && !slices.Contains(tags, mark) {
		tags = append(tags, mark)
	}
	access := s.AccessLevel
	if access == "" {
		access = AccessNotProtected
	}
	opt := &gl.CreateUserRunnerOptions{RunnerType: gl.Ptr(scope.runnerType()), Description: gl.Ptr(DescriptionPrefix + name),
		TagList: &tags, RunUntagged: gl.Ptr(s.RunUntagged), AccessLevel: gl.Ptr(access), Locked: gl.Ptr(true),
		MaintenanceNote: gl.Ptr("Created by HyperFleet for one VM; deleted when the VM goes.")}
	switch {
	case scope.Project != "":
		id, err := c.projectID(ctx, scope.Project)
		if err != nil {
			return Registration{}, err
		}
		opt.ProjectID = &id
	case scope.Group != "":
		id, err := c.groupID(ctx, scope.Group)
		if err != nil {
			return Registration{}, err
		}
		opt.GroupID = &id
	}
	r, _, err := c.gl.Users.CreateUserRunner(opt, gl.WithContext(ctx))
	if err != nil {
		return Registration{}, classify("create runner "+name+" in "+scope.String(), err)
	}
	if r.ID == 0 || !strings.HasPrefix(r.Token, "glrt-") {
		return Registration{}, &platform.Error{Class: platform.ErrTransient, Op: "create runner " + name,
			Err: errors.New("the response carries no runner ID or glrt- token")}
	}
	cfg, err := json.Marshal(RunnerConfig{URL: c.cfg.URL, Token: r.Token, CA: string(c.cfg.CAPEM)})
	if err != nil {
		return Registration{}, err
	}
	return Registration{RunnerID: r.ID, Config: cfg}, nil
}

// Deregister deletes a VM's runner, so its token can take no job any more; a runner already
// gone is not an error. A runner with a running job is platform.ErrRunnerBusy and stays: GitLab
// would delete it and fail the job.
func (c *Client) Deregister(ctx context.Context, runnerID int64) error {
	if runnerID <= 0 {
		return nil
	}
	op := "delete runner " + strconv.FormatInt(runnerID, 10)
	running, _, err := c.gl.Runners.ListRunnerJobs(runnerID, &gl.ListRunnerJobsOptions{Status: gl.Ptr("running"),
		ListOptions: gl.ListOptions{PerPage: 1}}, gl.WithContext(ctx))
	if err = classify(op, err); errors.Is(err, platform.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	if len(running) > 0 {
		return &platform.Error{Class: platform.ErrRunnerBusy, Op: op, StatusCode: http.StatusConflict,
			Err: fmt.Errorf("job %d is running on it", running[0].ID)}
	}
	_, err = c.gl.Runners.RemoveRunner(runnerID, gl.WithContext(ctx))
	if err = classify(op, err); errors.Is(err, platform.ErrNotFound) {
		return nil
	}
	return err
}

// DeregisterByName deletes every HyperFleet runner of the named VM in scope, for a VM whose
// runner ID was never recorded.
func (c *Client) DeregisterByName(ctx context.Context, scope Scope, name string) error {
	runners, err := c.Runners(ctx, scope, "")
	if err != nil {
		return err
	}
	for _, r := range runners {
		if r.Name == name {
			if err := c.Deregister(ctx, r.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// RunnerInfo is one of HyperFleet's runners in a scope.
type RunnerInfo struct {
	ID     int64
	Name   string // the Machine's name, from the description
	Online bool
	Status string // online, offline, stale, never_contacted
}

// Runners lists HyperFleet's runners (by description) of the scope's own type (a group scope
// does not list its ancestors' or the instance's runners); with mark, only those tagged with it.
func (c *Client) Runners(ctx context.Context, scope Scope, mark string) ([]RunnerInfo, error) {
	typ := scope.runnerType()
	var tags *[]string
	if mark != "" {
		tags = &[]string{mark}
	}
	var out []RunnerInfo
	collect := func(page []*gl.Runner) {
		for _, r := range page {
			if name, ok := strings.CutPrefix(r.Description, DescriptionPrefix); ok && r.RunnerType == typ {
				out = append(out, RunnerInfo{ID: r.ID, Name: name, Online: r.Online, Status: r.Status})
			}
		}
	}
	lo := gl.ListOptions{PerPage: 100}
	for range maxPages {
		var (
			page []*gl.Runner
			resp *gl.Response
			err  error
		)
		switch {
		case scope.Project != "":
			page, resp, err = c.gl.Runners.ListProjectRunners(scope.Project, &gl.ListProjectRunnersOptions{ListOptions: lo, Type: &typ, TagList: tags}, gl.WithContext(ctx))
		case scope.Group != "":
			page, resp, err = c.gl.Runners.ListGroupsRunners(scope.Group, &gl.ListGroupsRunnersOptions{ListOptions: lo, Type: &typ, TagList: tags}, gl.WithContext(ctx))
		default:
			page, resp, err = c.gl.Runners.ListAllRunners(&gl.ListRunnersOptions{ListOptions: lo, Type: &typ, TagList: tags}, gl.WithContext(ctx))
		}
		if err != nil {
			return nil, classify("list runners of "+scope.String(), err)
		}
		collect(page)
		if resp.NextPage == 0 {
			break
		}
		lo.Page = resp.NextPage
	}
	return out, nil
}

// groupID resolves a group's full path to its ID (POST /user/runners takes IDs only), once.
func (c *Client) groupID(ctx context.Context, path string) (int64, error) {
	if id, ok := c.ids.Load("group:" + path); ok {
		return id.(int64), nil
	}
	//lint:ignore SA1019 with_projects=false keeps the answer small on GitLab versions that still embed a group's projects
	g, _, err := c.gl.Groups.GetGroup(path, &gl.GetGroupOptions{WithProjects: gl.Ptr(false)}, gl.WithContext(ctx))
	if err != nil {
		return 0, classify("get group "+path, err)
	}
	c.ids.Store("group:"+path, g.ID)
	return g.ID, nil
}

// projectID resolves a project's full path to its ID, once.
func (c *Client) projectID(ctx context.Context, path string) (int64, error) {
	if id, ok := c.ids.Load("project:" + path); ok {
		return id.(int64), nil
	}
	p, _, err := c.gl.Projects.GetProject(path, nil, gl.WithContext(ctx))
	if err != nil {
		return 0, classify("get project "+path, err)
	}
	c.ids.Store("project:"+path, p.ID)
	return p.ID, nil
}
