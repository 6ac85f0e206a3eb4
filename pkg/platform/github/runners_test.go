package github

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

func TestJITConfigRegistersRunnerInScope(t *testing.T) {
	tests := []struct {
		name      string
		scope     platform.Scope
		pinned    bool // Config.InstallationID set instead of looked up
		wantScope string
	}{
		{name: "repository", scope: repoScope("acme/api"), wantScope: "acme/api"},
		{name: "organization", scope: orgScope("acme"), wantScope: "acme"},
		{name: "repository wins over organization", scope: platform.Scope{Organization: "acme", Repository: "acme/web"}, wantScope: "acme/web"},
		{name: "pinned installation", scope: orgScope("acme"), pinned: true, wantScope: "acme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			fake := fakegithub.StartForTest(t, fakegithub.Options{})
			cfg := Config{BaseURL: fake.URL(), AppID: fake.AppID(), PrivateKeyPEM: fake.AppKeyPEM()}
			if tt.pinned {
				cfg.InstallationID = fake.InstallationID("acme")
			} else {
				fake.InstallationID("acme")
			}
			c, err := NewClient(cfg)
			g.Expect(err).NotTo(HaveOccurred())

			encoded, id, err := jitConfig(c, context.Background(), tt.scope, platform.RunnerSpec{Name: "hf-pool-a-1", Labels: []string{"Linux", "x64"}})
			g.Expect(err).NotTo(HaveOccurred())

			runners := fake.Runners()
			g.Expect(runners).To(HaveLen(1))
			g.Expect(runners[0].ID).To(Equal(id))
			g.Expect(runners[0].Scope).To(Equal(tt.wantScope))
			g.Expect(runners[0].Labels).To(ConsistOf("linux", "self-hosted", "x64"))
			g.Expect(runners[0].RunnerGroupID).To(Equal(int64(1)))
			jit, err := fakegithub.DecodeJITConfig(encoded)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(jit.RunnerID()).To(Equal(id))
			g.Expect(jit.RunnerName()).To(Equal("hf-pool-a-1"))
		})
	}
}

func TestJITConfigReplacesStaleRunnerOfSameName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fake, c := newTestClient(t, fakegithub.Options{}, nil)
	spec := platform.RunnerSpec{Name: "hf-pool-a-1", Labels: []string{"linux"}}
	_, staleID, err := jitConfig(c, ctx, orgScope("acme"), spec)
	g.Expect(err).NotTo(HaveOccurred())

	_, newID, err := jitConfig(c, ctx, orgScope("acme"), spec)
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(newID).NotTo(Equal(staleID))
	g.Expect(fake.Runners()).To(ConsistOf(And(
		HaveField("ID", newID), HaveField("Name", "hf-pool-a-1"))))
}

func TestJITConfigRefusesToReplaceBusyRunner(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fake, c := newTestClient(t, fakegithub.Options{}, nil)
	fake.CreateJob("acme/api", []string{"self-hosted", "linux"})
	spec := platform.RunnerSpec{Name: "hf-pool-a-1", Labels: []string{"linux"}}
	encoded, busyID, err := jitConfig(c, ctx, repoScope("acme/api"), spec)
	g.Expect(err).NotTo(HaveOccurred())
	runner, err := fakegithub.NewRunnerClient(encoded, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(runner.Online(ctx)).To(Succeed())
	_, err = runner.Acquire(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	_, _, err = jitConfig(c, ctx, repoScope("acme/api"), spec)

	g.Expect(err).To(MatchError(platform.ErrRunnerBusy))
	g.Expect(fake.Runners()).To(ConsistOf(HaveField("ID", busyID)))
}

func TestListRunnersFollowsPages(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fake, c := newTestClient(t, fakegithub.Options{}, nil)
	const n = 105 // more than one page of 100
	for i := range n {
		_, _, err := jitConfig(c, ctx, orgScope("acme"), platform.RunnerSpec{Name: fmt.Sprintf("hf-%03d", i), Labels: []string{"linux"}})
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, _, err := jitConfig(c, ctx, repoScope("acme/api"), platform.RunnerSpec{Name: "hf-repo", Labels: []string{"linux"}})
	g.Expect(err).NotTo(HaveOccurred())

	runners, err := c.ListRunners(ctx, orgScope("acme"))

	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(runners).To(HaveLen(n), "only the organization's runners")
	g.Expect(runners[0]).To(Equal(platform.Runner{
		ID: runners[0].ID, Name: "hf-000", Labels: []string{"linux", "self-hosted"}, Status: platform.RunnerOffline,
	}))
	g.Expect(fake.Requests(fakegithub.EndpointOrgRunners)).To(Equal(2), "two pages")
}

func TestRemoveRunner(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		busy    bool
		gone    bool
		wantErr error
		remains int
	}{
		{name: "idle runner is removed", remains: 0},
		{name: "already removed runner is success", gone: true, remains: 0},
		{name: "busy runner is refused", busy: true, wantErr: platform.ErrRunnerBusy, remains: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			fake, c := newTestClient(t, fakegithub.Options{}, nil)
			fake.CreateJob("acme/api", []string{"linux"})
			encoded, id, err := jitConfig(c, ctx, repoScope("acme/api"), platform.RunnerSpec{Name: "hf-1", Labels: []string{"linux"}})
			g.Expect(err).NotTo(HaveOccurred())
			if tt.busy {
				runner, err := fakegithub.NewRunnerClient(encoded, nil)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(runner.Online(ctx)).To(Succeed())
				_, err = runner.Acquire(ctx)
				g.Expect(err).NotTo(HaveOccurred())
			}
			if tt.gone {
				g.Expect(c.RemoveRunner(ctx, repoScope("acme/api"), formatID(id))).To(Succeed())
			}

			err = c.RemoveRunner(ctx, repoScope("acme/api"), formatID(id))

			if tt.wantErr != nil {
				g.Expect(err).To(MatchError(tt.wantErr))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(fake.Runners()).To(HaveLen(tt.remains))
		})
	}
}

func TestRemoveRunnerByName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	fake, c := newTestClient(t, fakegithub.Options{}, nil)
	for _, name := range []string{"hf-1", "hf-2"} {
		_, _, err := jitConfig(c, ctx, orgScope("acme"), platform.RunnerSpec{Name: name, Labels: []string{"linux"}})
		g.Expect(err).NotTo(HaveOccurred())
	}

	g.Expect(c.RemoveRunnerByName(ctx, orgScope("acme"), "hf-1")).To(Succeed())
	g.Expect(c.RemoveRunnerByName(ctx, orgScope("acme"), "hf-missing")).To(Succeed())

	g.Expect(fake.Runners()).To(ConsistOf(HaveField("Name", "hf-2")))
}

func TestRemoveRunnerFaultIsTransient(t *testing.T) {
	g := NewWithT(t)
	fake, c := newTestClient(t, fakegithub.Options{}, nil)
	_, id, err := jitConfig(c, context.Background(), orgScope("acme"), platform.RunnerSpec{Name: "hf-1", Labels: []string{"linux"}})
	g.Expect(err).NotTo(HaveOccurred())
	fake.FailNext(fakegithub.EndpointOrgRemoveRunner, 1, http.StatusBadGateway)

	err = c.RemoveRunner(context.Background(), orgScope("acme"), formatID(id))

	g.Expect(err).To(MatchError(platform.ErrTransient))
	g.Expect(platform.IsRetryable(err)).To(BeTrue())
	g.Expect(fake.Runners()).To(HaveLen(1))
}

func TestJITConfigGivesUpAfterSecondConflict(t *testing.T) {
	g := NewWithT(t)
	fake, c := newTestClient(t, fakegithub.Options{}, nil)
	fake.FailNext(fakegithub.EndpointOrgJITConfig, 2, http.StatusConflict)

	_, _, err := jitConfig(c, context.Background(), orgScope("acme"), platform.RunnerSpec{Name: "hf-1", Labels: []string{"linux"}})

	g.Expect(err).To(MatchError(platform.ErrConflict))
	g.Expect(fake.Requests(fakegithub.EndpointOrgJITConfig)).To(Equal(2), "one retry, no more")
}
