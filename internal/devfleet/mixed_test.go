package devfleet

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestParsePlatforms(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "", want: []string{PlatformGitHub}},
		{in: "gitlab", want: []string{PlatformGitLab}},
		{in: "all", want: []string{PlatformGitHub, PlatformGitLab, PlatformBuildkite}},
		{in: "buildkite, github", want: []string{PlatformGitHub, PlatformBuildkite}},
		{in: "github,github", wantErr: "listed twice"},
		{in: "jenkins", wantErr: `platform "jenkins"`},
		{in: "github,", wantErr: `platform ""`},
	} {
		t.Run(tt.in, func(t *testing.T) {
			g := NewWithT(t)
			got, err := parsePlatforms(tt.in)
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

// TestMixedFleetPoolsAreDistinct: a mixed fleet's pools have names of their own, a Buildkite pool
// key=value tags and a queue, the others plain labels; a fleet of one platform keeps its pool.
func TestMixedFleetPoolsAreDistinct(t *testing.T) {
	g := NewWithT(t)
	o := Options{RepoRoot: t.TempDir(), Platform: PlatformAll}
	g.Expect(o.defaults()).To(Succeed())
	g.Expect(o.Platform).To(Equal("github,gitlab,buildkite"))
	gh, gl, bk := o.poolFor(PlatformGitHub), o.poolFor(PlatformGitLab), o.poolFor(PlatformBuildkite)
	g.Expect([]string{gh.Name, gl.Name, bk.Name}).To(Equal([]string{"github-linux-x64", "gitlab-linux-x64", "buildkite-linux-x64"}))
	g.Expect(gh.Labels).To(Equal(DefaultLabels))
	g.Expect(gl.Labels).To(Equal(DefaultLabels))
	g.Expect(bk.Labels).To(Equal(DefaultBuildkiteTags))
	g.Expect(bk.Queue).To(Equal(DefaultQueue))

	single := Options{RepoRoot: t.TempDir(), Platform: PlatformGitLab}
	g.Expect(single.defaults()).To(Succeed())
	g.Expect(single.poolFor(PlatformGitLab).Name).To(Equal(DefaultPoolName))

	g.Expect((&Options{RepoRoot: t.TempDir(), Platform: "github,circleci"}).defaults()).To(MatchError(ContainSubstring("circleci")))
}
