package packaging

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet-io/hyperfleet/pkg/config"
)

// setting is one manager setting: its flag and its environment variable.
type setting struct{ flag, env string }

var envInUsage = regexp.MustCompile(`\(env ([A-Z0-9_]+)\)`)

// managerSettings lists the manager's settings straight from pkg/config.
func managerSettings(t *testing.T) []setting {
	t.Helper()
	fs := flag.NewFlagSet("settings", flag.ContinueOnError)
	(&config.Manager{}).Bind(fs, func(string) string { return "" })
	var settings []setting
	fs.VisitAll(func(f *flag.Flag) {
		m := envInUsage.FindStringSubmatch(f.Usage)
		if m == nil {
			t.Errorf("flag --%s names no environment variable in its usage", f.Name)
			return
		}
		settings = append(settings, setting{flag: f.Name, env: m[1]})
	})
	return settings
}

// install is one rendering of the manager: its settings ConfigMap and Deployment.
type install struct {
	data    map[string]string
	manager corev1.Container
}

// setIn reports whether the install sets s: in the ConfigMap, as a flag, or as a container variable.
func (i install) setIn(s setting) bool {
	if _, ok := i.data[s.env]; ok {
		return true
	}
	if slices.ContainsFunc(i.manager.Args, func(a string) bool { return a == "--"+s.flag || strings.HasPrefix(a, "--"+s.flag+"=") }) {
		return true
	}
	return slices.ContainsFunc(i.manager.Env, func(e corev1.EnvVar) bool { return e.Name == s.env })
}

func renderedInstall(t *testing.T, manifests []byte) install {
	t.Helper()
	objs := decode(t, manifests)
	data, ok, err := unstructured.NestedStringMap(find(t, objs, "ConfigMap", "hyperfleet-config").Object, "data")
	if err != nil || !ok {
		t.Fatalf("ConfigMap data: %v", err)
	}
	return install{data: data, manager: container(t, deployment(t, find(t, objs, "Deployment", "hyperfleet-controller-manager")), "manager")}
}

// TestEverySettingIsConfigurable fails when a manager setting is added to pkg/config without a way
// to set it in each install and a line in docs/install.md.
func TestEverySettingIsConfigurable(t *testing.T) {
	settings := managerSettings(t)
	NewWithT(t).Expect(settings).To(ContainElements(setting{"log-level", "LOG_LEVEL"}, setting{"sweep-interval", "SWEEP_INTERVAL"}))

	installs := map[string]install{
		"kustomize":  renderedInstall(t, kustomize(t, "config/default")),
		"clusterctl": renderedInstall(t, mustRead(t, filepath.Join(releaseDir(t), "infrastructure-components.yaml"))),
		"helm":       renderedInstall(t, run(t, nil, nil, helmBinary(t), "template", "hyperfleet", chart, "--namespace", namespace)),
	}
	docs := string(mustRead(t, filepath.Join(env.RepoRoot, "docs", "install.md")))
	values := string(mustRead(t, filepath.Join(env.RepoRoot, chart, "values.yaml")))
	for _, s := range settings {
		t.Run(s.env, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(docs).To(ContainSubstring("`"+s.env+"`"), "docs/install.md does not document %s", s.env)
			g.Expect(docs).To(ContainSubstring("`--"+s.flag+"`"), "docs/install.md does not document --%s", s.flag)
			g.Expect(values).To(ContainSubstring(s.env), "charts/hyperfleet/values.yaml does not mention %s", s.env)
			for name, i := range installs {
				g.Expect(i.setIn(s)).To(BeTrue(), "the %s install cannot set %s", name, s.env)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(env.RepoRoot, "docs", "metrics.md")); err != nil {
		t.Error(err)
	}
}

// crdNames are the CRDs make manifests generated, by name, split into the bootstrap group and the rest.
func crdNames(t *testing.T) (all, bootstrap []string) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(env.RepoRoot, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	for _, f := range files {
		for _, o := range decode(t, mustRead(t, f)) {
			all = append(all, o.GetName())
			if strings.HasSuffix(o.GetName(), ".bootstrap.cluster.x-k8s.io") {
				bootstrap = append(bootstrap, o.GetName())
			}
		}
	}
	return all, bootstrap
}

func namesOfKind(objs []unstructured.Unstructured, kind string) []string {
	var names []string
	for _, o := range objs {
		if o.GetKind() == kind {
			names = append(names, o.GetName())
		}
	}
	return names
}
