package packaging

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet-io/hyperfleet/pkg/config"
)

// managerSettings lists the environment variables the manager reads, straight from pkg/config.
func managerSettings() []string {
	var names []string
	m := &config.Manager{}
	m.Bind(flag.NewFlagSet("settings", flag.ContinueOnError), func(name string) string {
		names = append(names, name)
		return ""
	})
	return names
}

// The bind addresses, leader election and the identity CA Secret (derived from the namespace, as
// for the bootstrap service) are wired to container ports and args, not the ConfigMap.
var settingsInArgs = map[string]bool{
	"METRICS_BIND_ADDRESS": true, "HEALTH_PROBE_BIND_ADDRESS": true, "WEBHOOK_BIND_ADDRESS": true, "LEADER_ELECT": true,
	"BOOTSTRAP_CA_SECRET": true,
}

// TestEverySettingIsConfigurable fails when a manager setting is added to pkg/config without a way
// to set it in each install and a line in docs/install.md.
func TestEverySettingIsConfigurable(t *testing.T) {
	settings := managerSettings()
	NewWithT(t).Expect(settings).To(ContainElements("LOG_LEVEL", "SWEEP_INTERVAL", "OTEL_EXPORTER_OTLP_ENDPOINT"))

	configMapData := func(t *testing.T, objs []unstructured.Unstructured) map[string]string {
		data, ok, err := unstructured.NestedStringMap(find(t, objs, "ConfigMap", "hyperfleet-config").Object, "data")
		if err != nil || !ok {
			t.Fatalf("ConfigMap data: %v", err)
		}
		return data
	}
	installs := map[string]map[string]string{
		"kustomize":  configMapData(t, decode(t, kustomize(t, "config/default"))),
		"clusterctl": configMapData(t, decode(t, mustRead(t, filepath.Join(releaseDir(t), "infrastructure-components.yaml")))),
		"helm":       configMapData(t, decode(t, run(t, nil, nil, helmBinary(t), "template", "hyperfleet", chart, "--namespace", namespace))),
	}
	docs := string(mustRead(t, filepath.Join(env.RepoRoot, "docs", "install.md")))
	values := string(mustRead(t, filepath.Join(env.RepoRoot, chart, "values.yaml")))
	for _, s := range settings {
		t.Run(s, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(docs).To(ContainSubstring("`"+s+"`"), "docs/install.md does not document %s", s)
			g.Expect(values).To(ContainSubstring(s), "charts/hyperfleet/values.yaml does not mention %s", s)
			if settingsInArgs[s] {
				return
			}
			for name, data := range installs {
				g.Expect(data).To(HaveKey(s), "%s install cannot set %s", name, s)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(env.RepoRoot, "docs", "metrics.md")); err != nil {
		t.Error(err)
	}
}
