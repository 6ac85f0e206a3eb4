package demand_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/demand"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

func orgPool(name, ns, org string, labels ...string) fleetv1.RunnerPool {
	return *builder.NewRunnerPool(name, ns).WithGitHub(fleetv1.GitHubSpec{Organization: org, Labels: labels}).Build()
}

func repoPool(name, ns, repo string, labels ...string) fleetv1.RunnerPool {
	return *builder.NewRunnerPool(name, ns).WithGitHub(fleetv1.GitHubSpec{Organization: "acme", Repository: repo, Labels: labels}).Build()
}

func TestSelectPool(t *testing.T) {
	deleting := orgPool("a-deleting", "ci", "acme", "linux")
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	tests := []struct {
		name       string
		pools      []fleetv1.RunnerPool
		repository string
		labels     []string
		want       string // namespace/name, empty for no pool
	}{
		{name: "repository pool preferred over organization pool",
			pools:      []fleetv1.RunnerPool{orgPool("org", "ci", "acme", "linux"), repoPool("repo", "ci", "acme/api", "linux", "x64")},
			repository: "acme/api", labels: []string{"self-hosted", "linux"}, want: "ci/repo"},
		{name: "repository pool of another repository is skipped",
			pools:      []fleetv1.RunnerPool{orgPool("org", "ci", "acme", "linux"), repoPool("repo", "ci", "acme/web", "linux")},
			repository: "acme/api", labels: []string{"linux"}, want: "ci/org"},
		{name: "job labels are a subset of the pool's",
			pools:      []fleetv1.RunnerPool{orgPool("gpu", "ci", "acme", "linux", "gpu")},
			repository: "acme/api", labels: []string{"self-hosted", "gpu"}, want: "ci/gpu"},
		{name: "fewest labels beyond the job's wins",
			pools:      []fleetv1.RunnerPool{orgPool("gpu", "ci", "acme", "linux", "x64", "gpu"), orgPool("plain", "ci", "acme", "linux", "x64")},
			repository: "acme/api", labels: []string{"linux"}, want: "ci/plain"},
		{name: "case-insensitive labels and names",
			pools:      []fleetv1.RunnerPool{orgPool("org", "ci", "Acme", "Linux", "X64")},
			repository: "ACME/api", labels: []string{"self-hosted", "LINUX", "x64"}, want: "ci/org"},
		{name: "ties break by namespace then name",
			pools:      []fleetv1.RunnerPool{orgPool("b", "ci", "acme", "linux"), orgPool("a", "z", "acme", "linux"), orgPool("c", "ci", "acme", "linux")},
			repository: "acme/api", labels: []string{"linux"}, want: "ci/b"},
		{name: "pools being deleted are skipped",
			pools:      []fleetv1.RunnerPool{deleting, orgPool("b", "ci", "acme", "linux")},
			repository: "acme/api", labels: []string{"linux"}, want: "ci/b"},
		{name: "no pool has the label",
			pools:      []fleetv1.RunnerPool{orgPool("org", "ci", "acme", "linux")},
			repository: "acme/api", labels: []string{"self-hosted", "windows"}},
		{name: "other organization",
			pools:      []fleetv1.RunnerPool{orgPool("org", "ci", "acme", "linux")},
			repository: "globex/api", labels: []string{"linux"}},
		{name: "GitHub-hosted job", pools: []fleetv1.RunnerPool{orgPool("org", "ci", "acme", "linux")},
			repository: "acme/api", labels: []string{"ubuntu-latest"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := demand.SelectPool(tt.pools, platform.KindGitHub, tt.repository, tt.labels)
			if tt.want == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Namespace + "/" + got.Name).To(Equal(tt.want))
		})
	}
}

func gitlabPool(name, ns string, scope fleetv1.GitLabScope, untagged bool, tags ...string) fleetv1.RunnerPool {
	return *builder.NewRunnerPool(name, ns).WithGitLab(fleetv1.GitLabSpec{URL: "https://gitlab.example.com", Scope: scope, Tags: tags, RunUntagged: untagged}).Build()
}

func buildkitePool(name, ns, queue string, tags ...string) fleetv1.RunnerPool {
	return *builder.NewRunnerPool(name, ns).WithBuildkite(fleetv1.BuildkiteSpec{Organization: "acme", Queue: queue, Tags: tags}).Build()
}

// TestSelectPoolKeepsPlatformsApart: a job is only ever routed to a pool of its own platform,
// even when a pool of another platform has the same scope and labels; each platform's matching
// rule and scope breadth apply.
func TestSelectPoolKeepsPlatformsApart(t *testing.T) {
	pools := []fleetv1.RunnerPool{
		orgPool("gh", "ci", "acme", "linux"),
		gitlabPool("gl-group", "ci", fleetv1.GitLabScope{Group: "acme"}, false, "linux"),
		gitlabPool("gl-instance", "ci", fleetv1.GitLabScope{Instance: true}, true),
		gitlabPool("gl-project", "ci", fleetv1.GitLabScope{Project: "acme/tools/lint"}, false, "linux", "docker"),
		buildkitePool("bk", "ci", "", "linux"),
		buildkitePool("bk-gpu", "ci", "gpu"),
	}
	tests := []struct {
		name       string
		kind       platform.Kind
		repository string
		labels     []string
		want       string
	}{
		{"github job takes the GitHub pool", platform.KindGitHub, "acme/api", []string{"linux"}, "gh"},
		{"gitlab job with the same labels takes the GitLab group pool", platform.KindGitLab, "acme/api", []string{"linux"}, "gl-group"},
		{"gitlab nested project pool wins over its group", platform.KindGitLab, "acme/tools/lint", []string{"linux"}, "gl-project"},
		{"gitlab untagged job goes to the pool that runs untagged", platform.KindGitLab, "other/app", nil, "gl-instance"},
		{"gitlab job of another group with tags finds no pool", platform.KindGitLab, "other/app", []string{"linux"}, ""},
		{"buildkite default queue", platform.KindBuildkite, "acme/pipeline", []string{"queue=default"}, "bk"},
		{"buildkite job without a queue rule", platform.KindBuildkite, "acme/pipeline", nil, "bk"},
		{"buildkite gpu queue", platform.KindBuildkite, "acme/pipeline", []string{"queue=gpu"}, "bk-gpu"},
		{"buildkite unknown queue", platform.KindBuildkite, "acme/pipeline", []string{"queue=arm"}, ""},
		{"unknown platform", "jenkins", "acme/api", []string{"linux"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := demand.SelectPool(pools, tt.kind, tt.repository, tt.labels)
			if tt.want == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Name).To(Equal(tt.want))
		})
	}
}

func TestJobsForPoolCountsEachJobOnce(t *testing.T) {
	g := NewWithT(t)
	pools := []fleetv1.RunnerPool{orgPool("linux", "ci", "acme", "linux"), orgPool("gpu", "ci", "acme", "linux", "gpu")}
	jobs := []platform.Job{
		{ID: "1", Repository: "acme/api", Labels: []string{"self-hosted", "linux"}},
		{ID: "2", Repository: "acme/api", Labels: []string{"self-hosted", "linux", "gpu"}},
	}
	g.Expect(demand.JobsForPool(pools, &pools[0], jobs)).To(ConsistOf(HaveField("ID", "1")))
	g.Expect(demand.JobsForPool(pools, &pools[1], jobs)).To(ConsistOf(HaveField("ID", "2")))
}
