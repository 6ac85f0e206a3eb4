package fakegithub_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

func TestGenerateJITConfig(t *testing.T) {
	fake := fakegithub.StartForTest(t, fakegithub.Options{})
	auth := "token " + installationToken(t, fake, "acme")
	registerRunner(t, fake, auth[len("token "):], "acme/api", "taken", "linux")
	tests := []struct {
		name    string
		path    string
		body    map[string]any
		status  int
		message string
	}{
		{name: "repository runner", path: "/repos/acme/api", status: http.StatusCreated,
			body: map[string]any{"name": "r1", "runner_group_id": 1, "labels": []string{"self-hosted", "linux"}, "work_folder": "_work"}},
		{name: "organization runner", path: "/orgs/acme", status: http.StatusCreated,
			body: map[string]any{"name": "taken", "runner_group_id": 1, "labels": []string{"linux"}}},
		{name: "name taken in the scope", path: "/repos/acme/API", status: http.StatusConflict,
			body:    map[string]any{"name": "taken", "runner_group_id": 1, "labels": []string{"linux"}},
			message: "Already exists - A runner with the name taken already exists."},
		{name: "no labels", path: "/repos/acme/api", status: http.StatusUnprocessableEntity,
			body: map[string]any{"name": "r2", "runner_group_id": 1, "labels": []string{}}},
		{name: "no runner group", path: "/repos/acme/api", status: http.StatusUnprocessableEntity,
			body: map[string]any{"name": "r3", "labels": []string{"linux"}}},
		{name: "other organization", path: "/orgs/globex", status: http.StatusForbidden,
			body: map[string]any{"name": "r4", "runner_group_id": 1, "labels": []string{"linux"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := call(t, http.MethodPost, fake.URL()+tt.path+"/actions/runners/generate-jitconfig", auth, tt.body)
			g.Expect(r.status).To(Equal(tt.status), string(r.body))
			if tt.message != "" {
				g.Expect(r.json(t)).To(HaveKeyWithValue("message", tt.message))
			}
			if tt.status != http.StatusCreated {
				return
			}
			body := r.json(t)
			g.Expect(body).To(HaveKeyWithValue("runner", And(
				HaveKeyWithValue("name", tt.body["name"]), HaveKeyWithValue("status", "offline"),
				HaveKeyWithValue("busy", false), HaveKeyWithValue("labels", HaveEach(HaveKeyWithValue("type", "custom"))))))
			cfg, err := fakegithub.DecodeJITConfig(body["encoded_jit_config"].(string))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.RunnerName()).To(Equal(tt.body["name"]))
			g.Expect(cfg.BaseURL()).To(Equal(fake.URL()))
			g.Expect(cfg.Settings).To(And(HaveField("Ephemeral", true), HaveField("PoolName", "Default"), HaveField("WorkFolder", "_work")))
			g.Expect(cfg.Scope()).To(Equal(strings.TrimPrefix(strings.TrimPrefix(tt.path, "/repos/"), "/orgs/")))
			g.Expect(cfg.Key.N.BitLen()).To(Equal(2048), "a runner's own 2048-bit RSA key, as actions/runner makes")
		})
	}
	g := NewWithT(t)
	g.Expect(fake.Runners()).To(HaveLen(3))
}

func TestListRunnersPagesAndFiltersByName(t *testing.T) {
	g := NewWithT(t)
	fake := fakegithub.StartForTest(t, fakegithub.Options{})
	token := installationToken(t, fake, "acme")
	for i := range 5 {
		registerRunner(t, fake, token, "acme", fmt.Sprintf("r%d", i), "linux")
	}
	url := fake.URL() + "/orgs/acme/actions/runners"

	page2 := call(t, http.MethodGet, url+"?per_page=2&page=2", "token "+token, nil)
	g.Expect(page2.json(t)).To(HaveKeyWithValue("total_count", BeNumerically("==", 5)))
	g.Expect(page2.json(t)["runners"]).To(HaveExactElements(HaveKeyWithValue("name", "r2"), HaveKeyWithValue("name", "r3")))
	g.Expect(page2.header.Get("Link")).To(And(ContainSubstring(`page=3&per_page=2>; rel="next"`), ContainSubstring(`rel="prev"`)))

	byName := call(t, http.MethodGet, url+"?name=r4", "token "+token, nil)
	g.Expect(byName.json(t)["runners"]).To(HaveExactElements(HaveKeyWithValue("name", "r4")))
}

func TestRemoveRunner(t *testing.T) {
	g := NewWithT(t)
	fake := fakegithub.StartForTest(t, fakegithub.Options{})
	token := installationToken(t, fake, "acme")
	idle, _ := fakegithub.DecodeJITConfig(registerRunner(t, fake, token, "acme/api", "idle", "linux"))
	busyCfg := registerRunner(t, fake, token, "acme/api", "busy", "linux")
	busy, _ := fakegithub.DecodeJITConfig(busyCfg)
	fake.CreateJob("acme/api", []string{"linux"})
	runner, err := fakegithub.NewRunnerClient(busyCfg, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(runner.Online(t.Context())).To(Succeed())
	_, err = runner.Acquire(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	url := func(id int64) string { return fmt.Sprintf("%s/repos/acme/api/actions/runners/%d", fake.URL(), id) }

	g.Expect(call(t, http.MethodGet, url(busy.RunnerID()), "token "+token, nil).json(t)).To(And(
		HaveKeyWithValue("busy", true), HaveKeyWithValue("status", "online")))
	g.Expect(call(t, http.MethodDelete, url(busy.RunnerID()), "token "+token, nil).status).To(Equal(http.StatusUnprocessableEntity))
	g.Expect(call(t, http.MethodDelete, url(idle.RunnerID()), "token "+token, nil).status).To(Equal(http.StatusNoContent))
	g.Expect(call(t, http.MethodDelete, url(idle.RunnerID()), "token "+token, nil).status).To(Equal(http.StatusNotFound))
	g.Expect(call(t, http.MethodGet, fmt.Sprintf("%s/orgs/acme/actions/runners/%d", fake.URL(), busy.RunnerID()), "token "+token, nil).status).
		To(Equal(http.StatusNotFound), "a repository runner is not in the organization scope")
	g.Expect(fake.Runners()).To(ConsistOf(HaveField("Name", "busy")))
}

func TestFaultsAndRequestCounts(t *testing.T) {
	g := NewWithT(t)
	fake := fakegithub.StartForTest(t, fakegithub.Options{})
	auth := "token " + installationToken(t, fake, "acme")
	url := fake.URL() + "/orgs/acme/actions/runners"
	fake.FailNext(fakegithub.EndpointOrgRunners, 2, http.StatusBadGateway)

	g.Expect(call(t, http.MethodGet, url, auth, nil).status).To(Equal(http.StatusBadGateway))
	g.Expect(call(t, http.MethodGet, url, auth, nil).status).To(Equal(http.StatusBadGateway))
	g.Expect(call(t, http.MethodGet, url, auth, nil).status).To(Equal(http.StatusOK))
	fake.FailNext(fakegithub.EndpointOrgRunners, 1, http.StatusInternalServerError)
	fake.ClearFaults()
	g.Expect(call(t, http.MethodGet, url, auth, nil).status).To(Equal(http.StatusOK))

	g.Expect(fake.Requests(fakegithub.EndpointOrgRunners)).To(Equal(4))
	g.Expect(fake.RequestCounts()).To(HaveKeyWithValue(fakegithub.EndpointAccessToken, 1))
}

func TestRegistrationToken(t *testing.T) {
	fake := fakegithub.StartForTest(t, fakegithub.Options{})
	auth := "token " + installationToken(t, fake, "acme")
	for _, path := range []string{"/repos/acme/api", "/orgs/acme"} {
		t.Run(path, func(t *testing.T) {
			r := call(t, http.MethodPost, fake.URL()+path+"/actions/runners/registration-token", auth, nil)
			g := NewWithT(t)
			g.Expect(r.status).To(Equal(http.StatusCreated))
			g.Expect(r.json(t)).To(And(HaveKeyWithValue("token", Not(BeEmpty())), HaveKey("expires_at")))
		})
	}
}
