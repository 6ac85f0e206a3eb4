package fakegitlab_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

// pythonGitLabResult is what testdata/python_gitlab.py prints.
type pythonGitLabResult struct {
	User struct {
		ID       int64  `json:"id"`
		Username string `json:"username"`
		State    string `json:"state"`
	} `json:"user"`
	AuthWarnings  []string `json:"auth_warnings"`
	Version       []string `json:"version"`
	GroupProjects []string `json:"group_projects"`
	Created       struct {
		ID          int64  `json:"id"`
		TokenPrefix string `json:"token_prefix"`
	} `json:"created"`
	CreatedTags        []string `json:"created_tags"`
	OwnedRunners       []int64  `json:"owned_runners"`
	OwnedRunnersTagged []int64  `json:"owned_runners_tagged"`
	OwnedRunnersOnline []int64  `json:"owned_runners_online"`
	AfterDelete        []int64  `json:"after_delete"`
	Jobs               []struct {
		ID     int64    `json:"id"`
		Status string   `json:"status"`
		Tags   []string `json:"tags"`
	} `json:"jobs"`
	Errors map[string]*struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"errors"`
}

// TestPythonGitLab: python-gitlab, a client nobody on this project wrote, authenticates
// (GET /user), reads the version, lists a group's projects newest first, creates a user runner
// with tag_list as a comma-separated string, lists owned runners with filters, deletes the
// runner, lists a project's jobs by scope[], and turns the fake's 401 and 404 bodies into its
// own exceptions with GitLab's messages.
func TestPythonGitLab(t *testing.T) {
	systemPython := testenv.RequirePython(t, "python3-gitlab", "gitlab")
	g := NewWithT(t)
	now := time.Unix(1_800_000_000, 0)
	s := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true, Clock: func() time.Time { now = now.Add(time.Second); return now }})
	s.AddProject("acme/api")
	s.AddProject("acme/platform/web")
	s.AddProject("acme/tools")
	pending := s.CreateJob("acme/api", fakegitlab.JobSpec{Tags: []string{"linux"}})
	s.CreateJob("acme/api", fakegitlab.JobSpec{Status: fakegitlab.JobSuccess})
	// A runner of another group the user also owns, and an instance runner that /runners leaves out.
	other := s.AddRunner(fakegitlab.Runner{Type: fakegitlab.GroupType, GroupID: s.AddGroup("globex").ID, Tags: []string{"macos"}})
	s.AddRunner(fakegitlab.Runner{Type: fakegitlab.InstanceType, RunUntagged: true})
	user := s.AddUser("ci-bot", false)
	tok := s.AddUserToken(user.ID, fakegitlab.ScopeAPI)

	ca := filepath.Join(t.TempDir(), "ca.pem")
	g.Expect(os.WriteFile(ca, s.CACertPEM(), 0o600)).To(Succeed())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, systemPython, "testdata/python_gitlab.py", s.URL(), tok, ca, "acme", "acme/api")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("python-gitlab: %v\n%s", err, stderr.String())
	}
	var res pythonGitLabResult
	g.Expect(json.Unmarshal(stdout.Bytes(), &res)).To(Succeed(), stdout.String())

	g.Expect(res.User.ID).To(Equal(user.ID))
	g.Expect(res.User.Username).To(Equal("ci-bot"))
	g.Expect(res.User.State).To(Equal("active"))
	g.Expect(res.AuthWarnings).To(BeEmpty(), "the user's web_url is under the instance's URL")
	g.Expect(res.Version).To(Equal([]string{fakegitlab.Version, fakegitlab.Revision}))
	g.Expect(res.GroupProjects).To(Equal([]string{"acme/tools", "acme/platform/web", "acme/api"}), "newest first")

	g.Expect(res.Created.TokenPrefix).To(Equal("glrt-"))
	g.Expect(res.CreatedTags).To(Equal([]string{"linux", "x64"}))
	g.Expect(res.OwnedRunners).To(Equal([]int64{other.ID, res.Created.ID}))
	g.Expect(res.OwnedRunnersTagged).To(Equal([]int64{res.Created.ID}))
	g.Expect(res.OwnedRunnersOnline).To(BeEmpty())
	g.Expect(res.AfterDelete).To(Equal([]int64{other.ID}))

	g.Expect(res.Jobs).To(HaveLen(1))
	g.Expect(res.Jobs[0].ID).To(Equal(pending.ID))
	g.Expect(res.Jobs[0].Status).To(Equal("pending"))
	g.Expect(res.Jobs[0].Tags).To(Equal([]string{"linux"}))

	for name, want := range map[string]struct {
		code    int
		message string
	}{
		"missing_project": {404, "404 Project Not Found"},
		"missing_runner":  {404, "404 Runner Not Found"},
		"unknown_route":   {404, "404 Not Found"},
		"forged_token":    {401, "401 Unauthorized"},
	} {
		got := res.Errors[name]
		g.Expect(got).NotTo(BeNil(), name)
		g.Expect(got.Code).To(Equal(want.code), name)
		g.Expect(got.Message).To(Equal(want.message), name)
	}
}
