package gitlab_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform/gitlab"
)

// TestTagMatching is GitLab's rule: every job tag on the runner (ignoring case), untagged
// jobs only with run_untagged, and a ref_protected runner only for protected refs.
func TestTagMatching(t *testing.T) {
	linux := gitlab.RunnerSettings{Tags: []string{"linux", "x64"}}
	untagged := gitlab.RunnerSettings{Tags: []string{"linux"}, RunUntagged: true}
	deploy := gitlab.RunnerSettings{Tags: []string{"deploy"}, AccessLevel: gitlab.AccessRefProtected}
	tests := []struct {
		name      string
		runner    gitlab.RunnerSettings
		job       []string
		protected bool
		want      bool
	}{
		{"all tags", linux, []string{"linux", "x64"}, false, true},
		{"subset", linux, []string{"linux"}, false, true},
		{"case", linux, []string{"Linux"}, false, true},
		{"missing tag", linux, []string{"linux", "gpu"}, false, false},
		{"untagged job, tagged-only runner", linux, nil, false, false},
		{"untagged job, run_untagged runner", untagged, nil, false, true},
		{"protected runner, unprotected ref", deploy, []string{"deploy"}, false, false},
		{"protected runner, protected ref", deploy, []string{"deploy"}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(tt.runner.Matches(gitlab.Job{Tags: tt.job}, tt.protected)).To(Equal(tt.want))
		})
	}
}

func TestWildcardMatch(t *testing.T) {
	g := NewWithT(t)
	g.Expect(gitlab.WildcardMatch("main", "main")).To(BeTrue())
	g.Expect(gitlab.WildcardMatch("main", "main2")).To(BeFalse())
	g.Expect(gitlab.WildcardMatch("release/*", "release/1.2")).To(BeTrue())
	g.Expect(gitlab.WildcardMatch("release/*", "release/1.2/hotfix")).To(BeTrue(), "* crosses slashes in GitLab")
	g.Expect(gitlab.WildcardMatch("release/*", "releases/1")).To(BeFalse())
	g.Expect(gitlab.WildcardMatch("*-stable", "13-2-stable")).To(BeTrue())
	g.Expect(gitlab.WildcardMatch("*-stable", "13-2-stable-x")).To(BeFalse())
	g.Expect(gitlab.WildcardMatch("v*.*", "v1.2")).To(BeTrue())
	g.Expect(gitlab.WildcardMatch("a*a", "a")).To(BeFalse())
}
