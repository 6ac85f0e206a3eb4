package packaging

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
)

var metricName = regexp.MustCompile(`hyperfleet_[a-z_]+`)

// TestDashboardMatchesMetrics keeps the Grafana dashboard, docs/metrics.md and the metrics pkg/metrics
// registers in step: every recorded metric is charted and documented, the dashboard queries nothing
// that is not recorded, and a deprecated name is documented with its replacement but no longer charted.
func TestDashboardMatchesMetrics(t *testing.T) {
	g := NewWithT(t)
	raw := mustRead(t, filepath.Join(env.RepoRoot, "config", "grafana", "hyperfleet-dashboard.json"))
	var dashboard struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	g.Expect(json.Unmarshal(raw, &dashboard)).To(Succeed())
	g.Expect(dashboard.UID).NotTo(BeEmpty())

	charted := map[string]bool{}
	for _, p := range dashboard.Panels {
		for _, target := range p.Targets {
			g.Expect(target.Expr).NotTo(BeEmpty(), "panel %q", p.Title)
			for _, m := range metricName.FindAllString(target.Expr, -1) {
				for _, suffix := range []string{"_bucket", "_count", "_sum"} {
					m = strings.TrimSuffix(m, suffix)
				}
				charted[m] = true
			}
		}
	}

	recorded := map[string]bool{}
	sources, err := filepath.Glob(filepath.Join(env.RepoRoot, "pkg", "metrics", "*.go"))
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range sources {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		g.Expect(err).NotTo(HaveOccurred())
		for _, m := range regexp.MustCompile(`"(hyperfleet_[a-z_]+)"`).FindAllStringSubmatch(string(b), -1) {
			recorded[m[1]] = true
		}
	}
	g.Expect(recorded).NotTo(BeEmpty(), "no metric names found in pkg/metrics")

	docs := string(mustRead(t, filepath.Join(env.RepoRoot, "docs", "metrics.md")))
	for _, m := range sortedKeys(recorded) {
		g.Expect(docs).To(ContainSubstring("`"+m+"`"), "metric %s is recorded but not in docs/metrics.md", m)
		if replacement, deprecated := metrics.Renamed[m]; deprecated {
			g.Expect(charted).NotTo(HaveKey(m), "the dashboard charts the deprecated %s; use %s", m, replacement)
			g.Expect(recorded).To(HaveKey(replacement), "%s is deprecated for %s, which pkg/metrics does not record", m, replacement)
			g.Expect(docs).To(MatchRegexp("(?m)^\\| `%s` \\| `%s` \\|", regexp.QuoteMeta(m), regexp.QuoteMeta(replacement)),
				"docs/metrics.md maps the deprecated %s to %s", m, replacement)
			continue
		}
		g.Expect(charted).To(HaveKey(m), "metric %s is recorded but not on the dashboard", m)
	}
	for _, m := range sortedKeys(charted) {
		g.Expect(recorded).To(HaveKey(m), "the dashboard charts %s, which pkg/metrics does not record", m)
	}
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
