package fakegitlab_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	gl "gitlab.com/gitlab-org/api/client-go"

	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
)

// rawResponse is one answer of the fake read in full.
type rawResponse struct {
	status int
	header http.Header
	body   map[string]any
}

// call sends a request with a PRIVATE-TOKEN (none when token is empty) and decodes a JSON
// object body; a body that is not a JSON object leaves body nil.
func call(t *testing.T, s *fakegitlab.Server, method, path, token, contentType, body string) rawResponse {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("PRIVATE-TOKEN", token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := s.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, _ := io.ReadAll(resp.Body)
	var obj map[string]any
	_ = json.Unmarshal(raw, &obj)
	return rawResponse{status: resp.StatusCode, header: resp.Header, body: obj}
}

// TestCurrentUserAndVersion: the calls GitLab's clients make first. GET /user is the token's
// user, with is_admin only in the administrator's entity
// (docs.gitlab.com/api/users/#get-the-current-user); GET /version is {version, revision}
// (docs.gitlab.com/api/version/). A token with only create_runner may not read them: 403
// insufficient_scope naming the scopes that would do.
func TestCurrentUserAndVersion(t *testing.T) {
	g := NewWithT(t)
	s := fakegitlab.StartForTest(t, fakegitlab.Options{TLS: true})
	bot := s.AddUser("ci-bot", false)
	c := client(t, s, s.AddUserToken(bot.ID, fakegitlab.ScopeReadAPI))

	u, _, err := c.Users.CurrentUser()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.ID).To(Equal(bot.ID))
	g.Expect(u.Username).To(Equal("ci-bot"))
	g.Expect(u.State).To(Equal("active"))
	g.Expect(u.IsAdmin).To(BeFalse())
	g.Expect(u.WebURL).To(Equal(s.URL() + "/ci-bot"))
	g.Expect(u.CreatedAt).NotTo(BeNil())

	admin, _, err := client(t, s, s.AddAdminToken(fakegitlab.ScopeReadUser)).Users.CurrentUser()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(admin.IsAdmin).To(BeTrue())
	g.Expect(admin.ID).NotTo(Equal(bot.ID), "each AddAdminToken is a user of its own")

	v, _, err := c.Version.GetVersion()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Version).To(Equal(fakegitlab.Version))
	g.Expect(v.Revision).To(Equal(fakegitlab.Revision))

	resp := call(t, s, http.MethodGet, "/api/v4/user", s.AddToken(fakegitlab.ScopeCreateRunner), "", "")
	g.Expect(resp.status).To(Equal(http.StatusForbidden))
	g.Expect(resp.body).To(HaveKeyWithValue("error", "insufficient_scope"))
	g.Expect(resp.body).To(HaveKeyWithValue("scope", "api read_api read_user"))
	g.Expect(call(t, s, http.MethodGet, "/api/v4/version", "", "", "").status).To(Equal(http.StatusUnauthorized))
}

// TestListOwnedRunners: GET /runners lists the runners of the user's groups and projects,
// never instance runners, filtered by type, status, paused, tag_list and the deprecated scope;
// an unknown filter value is 400 (docs.gitlab.com/api/runners/#list-owned-runners). GET
// /runners/all adds the instance runners for administrators
// (docs.gitlab.com/api/runners/#list-all-runners).
func TestListOwnedRunners(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1_800_000_000, 0)
	s := fakegitlab.StartForTest(t, fakegitlab.Options{Clock: func() time.Time { return now }})
	p := s.AddProject("acme/api")
	grp := s.AddRunner(fakegitlab.Runner{Type: fakegitlab.GroupType, GroupID: p.GroupID, Tags: []string{"linux", "x64"}})
	proj := s.AddRunner(fakegitlab.Runner{Type: fakegitlab.ProjectType, ProjectID: p.ID, Paused: true, RunUntagged: true})
	inst := s.AddRunner(fakegitlab.Runner{Type: fakegitlab.InstanceType, RunUntagged: true})
	online := &fakegitlab.RunnerClient{URL: s.URL(), Token: grp.Token}
	_, err := online.RequestJob(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	c := client(t, s, s.AddToken(fakegitlab.ScopeReadAPI))

	ids := func(opt *gl.ListRunnersOptions) []int64 {
		t.Helper()
		list, _, err := c.Runners.ListRunners(opt)
		g.Expect(err).NotTo(HaveOccurred())
		var out []int64
		for _, r := range list {
			out = append(out, r.ID)
		}
		return out
	}
	g.Expect(ids(nil)).To(Equal([]int64{grp.ID, proj.ID}), "instance runners are not owned")
	g.Expect(ids(&gl.ListRunnersOptions{Type: gl.Ptr(fakegitlab.ProjectType)})).To(Equal([]int64{proj.ID}))
	g.Expect(ids(&gl.ListRunnersOptions{Status: gl.Ptr("online")})).To(Equal([]int64{grp.ID}))
	g.Expect(ids(&gl.ListRunnersOptions{Status: gl.Ptr("never_contacted")})).To(Equal([]int64{proj.ID}))
	g.Expect(ids(&gl.ListRunnersOptions{Paused: gl.Ptr(true)})).To(Equal([]int64{proj.ID}))
	//lint:ignore SA1019 the fake answers the deprecated scope parameter as GitLab still does
	g.Expect(ids(&gl.ListRunnersOptions{Scope: gl.Ptr("active")})).To(Equal([]int64{grp.ID}))
	g.Expect(ids(&gl.ListRunnersOptions{TagList: gl.Ptr([]string{"x64", "linux"})})).To(Equal([]int64{grp.ID}))

	now = now.Add(8 * 24 * time.Hour)
	g.Expect(ids(&gl.ListRunnersOptions{Status: gl.Ptr("stale")})).To(Equal([]int64{grp.ID, proj.ID}),
		"silent for seven days, or created seven days ago and never contacted")

	for _, query := range []string{"type=shared", "status=busy", "scope=shared", "paused=maybe"} {
		resp := call(t, s, http.MethodGet, "/api/v4/runners?"+query, s.AddToken(fakegitlab.ScopeReadAPI), "", "")
		g.Expect(resp.status).To(Equal(http.StatusBadRequest), query)
		g.Expect(resp.body).To(HaveKey("error"), query)
	}

	all, _, err := client(t, s, s.AddAdminToken(fakegitlab.ScopeReadAPI)).Runners.ListAllRunners(
		&gl.ListRunnersOptions{Type: gl.Ptr(fakegitlab.InstanceType)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(all).To(HaveLen(1))
	g.Expect(all[0].ID).To(Equal(inst.ID))
	g.Expect(all[0].IsShared).To(BeTrue())
}

// TestCreateRunnerTagListForms: POST /user/runners takes tag_list as an array or as a
// comma-separated string, in JSON and in a form (docs.gitlab.com/api/users/#create-a-runner-linked-to-a-user);
// booleans as Grape coerces them (True, 1, yes).
func TestCreateRunnerTagListForms(t *testing.T) {
	s := fakegitlab.StartForTest(t, fakegitlab.Options{})
	grp := s.AddGroup("acme")
	tok := s.AddToken(fakegitlab.ScopeCreateRunner, fakegitlab.ScopeReadAPI)
	gid := grp.ID
	form := func(v url.Values) string {
		v.Set("runner_type", "group_type")
		v.Set("group_id", jsonInt(gid))
		return v.Encode()
	}
	for _, tc := range []struct {
		name, contentType, body string
	}{
		{"JSON array", "application/json", `{"runner_type":"group_type","group_id":` + jsonInt(gid) + `,"tag_list":["linux","x64"],"run_untagged":false}`},
		{"JSON string", "application/json", `{"runner_type":"group_type","group_id":` + jsonInt(gid) + `,"tag_list":"linux, x64","run_untagged":false}`},
		{"form string", "application/x-www-form-urlencoded", form(url.Values{"tag_list": {"linux,x64"}, "run_untagged": {"False"}})},
		{"form array", "application/x-www-form-urlencoded", form(url.Values{"tag_list[]": {"linux", "x64"}, "run_untagged": {"0"}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			resp := call(t, s, http.MethodPost, "/api/v4/user/runners", tok, tc.contentType, tc.body)
			g.Expect(resp.status).To(Equal(http.StatusCreated), "%v", resp.body)
			id := int64(resp.body["id"].(float64))
			details, _, err := client(t, s, tok).Runners.GetRunnerDetails(id)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(details.TagList).To(Equal([]string{"linux", "x64"}))
			g.Expect(details.RunUntagged).To(BeFalse())
		})
	}

	// GitLab's own Go client sends the array.
	g := NewWithT(t)
	created, _, err := client(t, s, tok).Users.CreateUserRunner(&gl.CreateUserRunnerOptions{
		RunnerType: gl.Ptr("group_type"), GroupID: gl.Ptr(gid), TagList: gl.Ptr([]string{"gpu", "linux"}), RunUntagged: gl.Ptr(false)})
	g.Expect(err).NotTo(HaveOccurred())
	details, _, err := client(t, s, tok).Runners.GetRunnerDetails(created.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(details.TagList).To(Equal([]string{"gpu", "linux"}))

	resp := call(t, s, http.MethodPost, "/api/v4/user/runners", tok, "application/x-www-form-urlencoded",
		form(url.Values{"paused": {"maybe"}}))
	g.Expect(resp.status).To(Equal(http.StatusBadRequest))
	g.Expect(resp.body).To(HaveKeyWithValue("error", "paused is invalid"))
}

func jsonInt(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestErrorBodies: GitLab's refusals as its API gives them. A route it does not have is 404
// {"error":"404 Not Found"}; a missing resource 404 {"message":"404 <Thing> Not Found"}; a
// known route with another method 405 with Allow; no or an unknown token 401
// {"message":"401 Unauthorized"}; a revoked one 401 invalid_token; a path ID that is not a
// number 400 "<param> is invalid" (docs.gitlab.com/api/rest/troubleshooting/#status-codes,
// docs.gitlab.com/api/rest/authentication/).
func TestErrorBodies(t *testing.T) {
	g := NewWithT(t)
	s := fakegitlab.StartForTest(t, fakegitlab.Options{})
	s.AddProject("acme/api")
	tok := s.AddToken(fakegitlab.ScopeAPI)
	revoked := s.AddToken(fakegitlab.ScopeAPI)
	s.RevokeToken(revoked)

	for _, tc := range []struct {
		method, path, token string
		status              int
		key, value          string
	}{
		{http.MethodGet, "/api/v4/users/1", tok, http.StatusNotFound, "error", "404 Not Found"},
		{http.MethodGet, "/api/v4/nothing/here", "", http.StatusNotFound, "error", "404 Not Found"},
		{http.MethodGet, "/api/v4/projects/acme%2Fnope", tok, http.StatusNotFound, "message", "404 Project Not Found"},
		{http.MethodGet, "/api/v4/groups/nope", tok, http.StatusNotFound, "message", "404 Group Not Found"},
		{http.MethodGet, "/api/v4/runners/999999", tok, http.StatusNotFound, "message", "404 Runner Not Found"},
		{http.MethodGet, "/api/v4/runners/abc", tok, http.StatusBadRequest, "error", "id is invalid"},
		{http.MethodPatch, "/api/v4/user/runners", tok, http.StatusMethodNotAllowed, "error", "405 Not Allowed"},
		{http.MethodGet, "/api/v4/projects", "", http.StatusUnauthorized, "message", "401 Unauthorized"},
		{http.MethodGet, "/api/v4/projects", "glpat-forged", http.StatusUnauthorized, "message", "401 Unauthorized"},
		{http.MethodGet, "/api/v4/projects", revoked, http.StatusUnauthorized, "error", "invalid_token"},
		{http.MethodGet, "/api/v4/runners/all", tok, http.StatusForbidden, "message", "403 Forbidden"},
	} {
		resp := call(t, s, tc.method, tc.path, tc.token, "", "")
		g.Expect(resp.status).To(Equal(tc.status), tc.method+" "+tc.path)
		g.Expect(resp.header.Get("Content-Type")).To(HavePrefix("application/json"), tc.method+" "+tc.path)
		g.Expect(resp.body).To(HaveKeyWithValue(tc.key, tc.value), tc.method+" "+tc.path)
		if tc.status == http.StatusMethodNotAllowed {
			g.Expect(resp.header.Get("Allow")).To(ContainSubstring(http.MethodPost))
		}
	}
	_, _, err := client(t, s, tok).Runners.GetRunnerDetails(999999)
	g.Expect(statusOf(err)).To(Equal(http.StatusNotFound))
}

// TestProjectsNewestFirst: the project listings default to order_by=created_at, sort=desc and
// honour order_by and sort (docs.gitlab.com/api/projects/#list-all-projects,
// docs.gitlab.com/api/groups/#list-projects); pages carry X-Total, X-Next-Page and a Link
// header, per_page is at most 100 (docs.gitlab.com/api/rest/#offset-based-pagination).
func TestProjectsNewestFirst(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1_800_000_000, 0)
	s := fakegitlab.StartForTest(t, fakegitlab.Options{Clock: func() time.Time { now = now.Add(time.Second); return now }})
	for _, p := range []string{"acme/zeta", "acme/alpha", "acme/sub/mid"} {
		s.AddProject(p)
	}
	c := client(t, s, s.AddToken(fakegitlab.ScopeReadAPI))
	paths := func(list []*gl.Project) []string {
		var out []string
		for _, p := range list {
			out = append(out, p.PathWithNamespace)
		}
		return out
	}

	list, _, err := c.Groups.ListGroupProjects("acme", &gl.ListGroupProjectsOptions{IncludeSubGroups: gl.Ptr(true)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(paths(list)).To(Equal([]string{"acme/sub/mid", "acme/alpha", "acme/zeta"}))
	list, _, err = c.Groups.ListGroupProjects("acme", &gl.ListGroupProjectsOptions{IncludeSubGroups: gl.Ptr(true),
		OrderBy: gl.Ptr("name"), Sort: gl.Ptr("asc")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(paths(list)).To(Equal([]string{"acme/alpha", "acme/sub/mid", "acme/zeta"}))
	list, _, err = c.Projects.ListProjects(&gl.ListProjectsOptions{OrderBy: gl.Ptr("id"), Sort: gl.Ptr("asc")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(paths(list)).To(Equal([]string{"acme/zeta", "acme/alpha", "acme/sub/mid"}))

	list, resp, err := c.Projects.ListProjects(&gl.ListProjectsOptions{ListOptions: gl.ListOptions{PerPage: 2}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(paths(list)).To(Equal([]string{"acme/sub/mid", "acme/alpha"}))
	g.Expect(resp.TotalItems).To(Equal(int64(3)))
	g.Expect(resp.NextPage).To(Equal(int64(2)))
	g.Expect(resp.Header.Get("Link")).To(ContainSubstring(`rel="next"`))
	list, resp, err = c.Projects.ListProjects(&gl.ListProjectsOptions{ListOptions: gl.ListOptions{PerPage: 2, Page: 2}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(paths(list)).To(Equal([]string{"acme/zeta"}))
	g.Expect(resp.NextPage).To(BeZero())

	tok := s.AddToken(fakegitlab.ScopeReadAPI)
	g.Expect(call(t, s, http.MethodGet, "/api/v4/projects?per_page=500", tok, "", "").header.Get("X-Per-Page")).To(Equal("100"))
	for _, query := range []string{"order_by=stars", "sort=up"} {
		r := call(t, s, http.MethodGet, "/api/v4/groups/acme/projects?"+query, tok, "", "")
		g.Expect(r.status).To(Equal(http.StatusBadRequest), query)
	}
}

// TestRateLimitPerUser: GitLab limits authenticated API requests per user
// (docs.gitlab.com/administration/settings/user_and_ip_rate_limits/): two tokens of one user
// share one budget, two users do not.
func TestRateLimitPerUser(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1_800_000_000, 0)
	s := fakegitlab.StartForTest(t, fakegitlab.Options{RateLimit: 2, Clock: func() time.Time { return now }})
	bot := s.AddUser("ci-bot", false)
	first, second := s.AddUserToken(bot.ID, fakegitlab.ScopeReadAPI), s.AddUserToken(bot.ID, fakegitlab.ScopeReadAPI)
	other := s.AddToken(fakegitlab.ScopeReadAPI)

	g.Expect(call(t, s, http.MethodGet, "/api/v4/projects", first, "", "").status).To(Equal(http.StatusOK))
	g.Expect(call(t, s, http.MethodGet, "/api/v4/projects", second, "", "").status).To(Equal(http.StatusOK))
	resp := call(t, s, http.MethodGet, "/api/v4/projects", second, "", "")
	g.Expect(resp.status).To(Equal(http.StatusTooManyRequests), "the user's budget is spent, whichever token")
	g.Expect(resp.header.Get("RateLimit-Observed")).To(Equal("3"))
	resp = call(t, s, http.MethodGet, "/api/v4/projects", other, "", "")
	g.Expect(resp.status).To(Equal(http.StatusOK), "another user has a budget of its own")
	g.Expect(resp.header.Get("RateLimit-Remaining")).To(Equal("1"))
}
