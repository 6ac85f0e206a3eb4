package platform

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestMatchesLabels(t *testing.T) {
	tests := []struct {
		name   string
		job    []string
		runner []string
		want   bool
	}{
		{name: "same labels", job: []string{"linux", "x64"}, runner: []string{"linux", "x64"}, want: true},
		{name: "case-insensitive", job: []string{"Linux", "X64"}, runner: []string{"LINUX", "x64"}, want: true},
		{name: "job labels a subset of the runner's", job: []string{"linux"}, runner: []string{"linux", "x64", "gpu"}, want: true},
		{name: "runner lacks one label", job: []string{"linux", "gpu"}, runner: []string{"linux", "x64"}, want: false},
		{name: "self-hosted implied on the runner", job: []string{"self-hosted", "linux"}, runner: []string{"linux"}, want: true},
		{name: "only self-hosted", job: []string{"Self-Hosted"}, runner: []string{"linux"}, want: true},
		{name: "GitHub-hosted label", job: []string{"ubuntu-latest"}, runner: []string{"linux"}, want: false},
		{name: "whitespace and duplicates ignored", job: []string{" linux ", "linux"}, runner: []string{"linux"}, want: true},
		{name: "job without labels matches nothing", job: nil, runner: []string{"linux"}, want: false},
		{name: "runner without labels has self-hosted only", job: []string{"linux"}, runner: nil, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(MatchesLabels(tt.job, tt.runner)).To(Equal(tt.want))
		})
	}
}

func TestLabelSetKey(t *testing.T) {
	g := NewWithT(t)
	g.Expect(LabelSetKey([]string{"X64", "self-hosted", "linux", "linux"})).To(Equal("linux,x64"))
	g.Expect(LabelSetKey([]string{"linux", "x64"})).To(Equal(LabelSetKey([]string{"x64", "Linux", "Self-Hosted"})))
	g.Expect(NormalizeLabels([]string{"B", " a", "", "b"})).To(Equal([]string{"a", "b"}))
}

func TestFilterJobs(t *testing.T) {
	g := NewWithT(t)
	jobs := []Job{{ID: "1", Labels: []string{"linux"}}, {ID: "2", Labels: []string{"gpu"}}, {ID: "3", Labels: []string{"self-hosted", "linux", "x64"}}}
	g.Expect(FilterJobs(jobs, []string{"linux", "x64"})).To(ConsistOf(HaveField("ID", "1"), HaveField("ID", "3")))
}
