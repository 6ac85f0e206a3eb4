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
			got := demand.SelectPool(tt.pools, tt.repository, tt.labels)
			if tt.want == "" {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got).NotTo(BeNil())
			g.Expect(got.Namespace + "/" + got.Name).To(Equal(tt.want))
		})
	}
}

func TestJobsForPoolCountsEachJobOnce(t *testing.T) {
	g := NewWithT(t)
	pools := []fleetv1.RunnerPool{orgPool("linux", "ci", "acme", "linux"), orgPool("gpu", "ci", "acme", "linux", "gpu")}
	jobs := []platform.Job{
		{ID: 1, Repository: "acme/api", Labels: []string{"self-hosted", "linux"}},
		{ID: 2, Repository: "acme/api", Labels: []string{"self-hosted", "linux", "gpu"}},
	}
	g.Expect(demand.JobsForPool(pools, &pools[0], jobs)).To(ConsistOf(HaveField("ID", int64(1))))
	g.Expect(demand.JobsForPool(pools, &pools[1], jobs)).To(ConsistOf(HaveField("ID", int64(2))))
}
