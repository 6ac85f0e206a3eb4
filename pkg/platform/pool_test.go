package platform

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

func TestPoolOf(t *testing.T) {
	g := NewWithT(t)
	gh := &fleetv1.RunnerPool{Spec: fleetv1.RunnerPoolSpec{Platform: fleetv1.PlatformSpec{GitHub: &fleetv1.GitHubSpec{
		Organization: "acme", Repository: "acme/api", Labels: []string{"Linux", "x64"}}}}}
	p, ok := PoolOf(gh)
	g.Expect(ok).To(BeTrue())
	g.Expect(p).To(Equal(Pool{Kind: KindGitHub, Scope: Scope{Repository: "acme/api"}, Labels: []string{"linux", "x64"}}))
	g.Expect(KindOf(gh)).To(Equal(KindGitHub))

	gl := &fleetv1.RunnerPool{Spec: fleetv1.RunnerPoolSpec{Platform: fleetv1.PlatformSpec{GitLab: &fleetv1.GitLabSpec{
		Scope: fleetv1.GitLabScope{Group: "platform/ci"}, Tags: []string{"docker"}, RunUntagged: true}}}}
	p, _ = PoolOf(gl)
	g.Expect(p).To(Equal(Pool{Kind: KindGitLab, Scope: Scope{Organization: "platform/ci"}, Labels: []string{"docker"}, RunUntagged: true}))

	bk := &fleetv1.RunnerPool{Spec: fleetv1.RunnerPoolSpec{Platform: fleetv1.PlatformSpec{Buildkite: &fleetv1.BuildkiteSpec{
		Organization: "acme", Tags: []string{"os=linux", "queue=ignored"}}}}}
	p, _ = PoolOf(bk)
	g.Expect(p).To(Equal(Pool{Kind: KindBuildkite, Scope: Scope{Organization: "acme"}, Labels: []string{"os=linux", "queue=default"}}))
	bk.Spec.Platform.Buildkite.AgentEndpoint = "http://agent.lab/v3"
	p, _ = PoolOf(bk)
	u, plain := p.PlainHTTPURL()
	g.Expect(plain).To(BeTrue())
	g.Expect(u).To(Equal("http://agent.lab/v3"))

	_, ok = PoolOf(&fleetv1.RunnerPool{})
	g.Expect(ok).To(BeFalse())
	g.Expect(KindOf(&fleetv1.RunnerPool{})).To(BeEmpty())
}

func TestPoolServes(t *testing.T) {
	tests := []struct {
		name string
		pool Pool
		job  []string
		want bool
	}{
		{"github subset", Pool{Kind: KindGitHub, Labels: []string{"linux", "x64"}}, []string{"self-hosted", "Linux"}, true},
		{"github missing label", Pool{Kind: KindGitHub, Labels: []string{"linux"}}, []string{"linux", "gpu"}, false},
		{"github no labels", Pool{Kind: KindGitHub, Labels: []string{"linux"}}, nil, false},
		{"gitlab tags subset", Pool{Kind: KindGitLab, Labels: []string{"docker", "linux"}}, []string{"Docker"}, true},
		{"gitlab missing tag", Pool{Kind: KindGitLab, Labels: []string{"docker"}}, []string{"docker", "gpu"}, false},
		{"gitlab untagged refused", Pool{Kind: KindGitLab, Labels: []string{"docker"}}, nil, false},
		{"gitlab untagged allowed", Pool{Kind: KindGitLab, Labels: []string{"docker"}, RunUntagged: true}, nil, true},
		{"gitlab self-hosted not implied", Pool{Kind: KindGitLab, Labels: []string{"docker"}}, []string{"self-hosted"}, false},
		{"buildkite default queue", Pool{Kind: KindBuildkite, Labels: []string{"queue=default"}}, nil, true},
		{"buildkite other queue", Pool{Kind: KindBuildkite, Labels: []string{"queue=gpu"}}, nil, false},
		{"buildkite queue rule", Pool{Kind: KindBuildkite, Labels: []string{"queue=gpu", "os=linux"}}, []string{"queue=gpu", "os=linux"}, true},
		{"buildkite wildcard", Pool{Kind: KindBuildkite, Labels: []string{"queue=gpu", "os=linux"}}, []string{"queue=gpu", "os=*"}, true},
		{"buildkite prefix", Pool{Kind: KindBuildkite, Labels: []string{"queue=gpu", "os=linux-amd64"}}, []string{"queue=gpu", "os=linux*"}, true},
		{"buildkite tag missing", Pool{Kind: KindBuildkite, Labels: []string{"queue=gpu"}}, []string{"queue=gpu", "os=linux"}, false},
		{"buildkite rule not key=value", Pool{Kind: KindBuildkite, Labels: []string{"queue=default"}}, []string{"linux"}, false},
		{"unknown kind", Pool{Kind: "jenkins", Labels: []string{"linux"}}, []string{"linux"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(tt.pool.Serves(tt.job)).To(Equal(tt.want))
		})
	}
}

type stubSource struct{ kind Kind }

func (s stubSource) Platform(context.Context, *fleetv1.RunnerPool) (Platform, Scope, error) {
	return nil, Scope{Organization: string(s.kind)}, nil
}
func (s stubSource) Installation(context.Context, *fleetv1.RunnerPool) (string, error) {
	return string(s.kind), nil
}

func TestDispatchPicksThePoolsPlatform(t *testing.T) {
	g := NewWithT(t)
	d := Dispatch{KindGitHub: stubSource{KindGitHub}, KindGitLab: stubSource{KindGitLab}}
	ctx := context.Background()
	gl := &fleetv1.RunnerPool{Spec: fleetv1.RunnerPoolSpec{Platform: fleetv1.PlatformSpec{GitLab: &fleetv1.GitLabSpec{}}}}
	inst, err := d.Installation(ctx, gl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(inst).To(Equal("gitlab"))
	_, scope, err := d.Platform(ctx, gl)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(scope.Organization).To(Equal("gitlab"))

	bk := &fleetv1.RunnerPool{Spec: fleetv1.RunnerPoolSpec{Platform: fleetv1.PlatformSpec{Buildkite: &fleetv1.BuildkiteSpec{}}}}
	_, _, err = d.Platform(ctx, bk)
	g.Expect(err).To(MatchError(ErrUnsupported))
	_, err = d.Installation(ctx, &fleetv1.RunnerPool{})
	g.Expect(err).To(MatchError(ErrUnsupported))
}

func TestRegisterRefusesDuplicatesAndIncompleteDrivers(t *testing.T) {
	g := NewWithT(t)
	g.Expect(func() { Register(Driver{Kind: "jenkins"}) }).To(Panic())
	g.Expect(func() { Register(Driver{Kind: KindGitLab}) }).To(Panic())
}
