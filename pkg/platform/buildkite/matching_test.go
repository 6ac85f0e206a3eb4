package buildkite_test

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform/buildkite"
)

func TestQueueAndTagMatching(t *testing.T) {
	agent := buildkite.AgentTags("linux", map[string]string{"os": "linux", "arch": "amd64", "size": "large"})
	tests := []struct {
		name  string
		rules []string
		want  bool
	}{
		{"queue only", []string{"queue=linux"}, true},
		{"queue and tags", []string{"queue=linux", "os=linux", "arch=amd64"}, true},
		{"other queue", []string{"queue=macos"}, false},
		{"no queue rule means the default queue", []string{"os=linux"}, false},
		{"missing tag", []string{"queue=linux", "gpu=true"}, false},
		{"different value", []string{"queue=linux", "arch=arm64"}, false},
		{"wildcard value", []string{"queue=linux", "size=*"}, true},
		{"pattern value", []string{"queue=linux", "arch=amd*"}, true},
		{"malformed rule", []string{"queue=linux", "gpu"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(agent.Matches(tt.rules)).To(Equal(tt.want))
		})
	}
	g := NewWithT(t)
	g.Expect(buildkite.AgentTags("", nil).Matches(nil)).To(BeTrue(), "default queue agents run jobs without a queue rule")
	g.Expect(agent.Strings()).To(Equal([]string{"arch=amd64", "os=linux", "queue=linux", "size=large"}))
	_, err := buildkite.ParseTags([]string{"=x"})
	g.Expect(err).To(HaveOccurred())
}
