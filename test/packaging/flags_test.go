package packaging

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet-io/hyperfleet/pkg/config"
)

// containerEnvironment is what the kubelet would give the container: the ConfigMap's data
// (envFrom), then env entries with $(VAR) expanded. Secret-sourced variables are left out.
func containerEnvironment(c corev1.Container, configMap map[string]string, namespace string) map[string]string {
	envs := map[string]string{}
	for k, v := range configMap {
		envs[k] = v
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			envs[e.Name] = namespace
		case e.ValueFrom == nil:
			envs[e.Name] = expand(e.Value, envs)
		}
	}
	return envs
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func expand(s string, envs map[string]string) string {
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		if v, ok := envs[ref[2:len(ref)-1]]; ok {
			return v
		}
		return ref
	})
}

// TestManagerAcceptsShippedConfiguration parses each install's manager flags and environment with
// pkg/config, exactly as cmd/manager does at start, so a renamed flag or a value that does not parse
// fails here instead of in a crash-looping pod.
func TestManagerAcceptsShippedConfiguration(t *testing.T) {
	substituted := run(t, nil, clusterctlEnv(t), env.Tools.Clusterctl(), "generate", "yaml", "--from",
		filepath.Join(releaseDir(t), "infrastructure-components.yaml"))
	for name, manifests := range map[string][]byte{
		"kustomize":  kustomize(t, "config/default"),
		"clusterctl": substituted,
		"helm":       run(t, nil, nil, helmBinary(t), "template", "hyperfleet", chart, "--namespace", namespace),
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			objs := decode(t, manifests)
			data, _, err := unstructured.NestedStringMap(find(t, objs, "ConfigMap", "hyperfleet-config").Object, "data")
			g.Expect(err).NotTo(HaveOccurred())
			c := container(t, deployment(t, find(t, objs, "Deployment", "hyperfleet-controller-manager")), "manager")
			envs := containerEnvironment(c, data, namespace)
			args := make([]string, len(c.Args))
			for i, a := range c.Args {
				args[i] = expand(a, envs)
			}

			m := &config.Manager{}
			fs := flag.NewFlagSet("manager", flag.ContinueOnError)
			check := m.Bind(fs, func(k string) string { return envs[k] })
			g.Expect(fs.Parse(args)).To(Succeed())
			g.Expect(check()).To(Succeed())
			g.Expect(m.LeaderElect).To(BeTrue())
			g.Expect(m.MetricsSecure).To(BeTrue())
			g.Expect(m.MetricsBindAddress).To(Equal(":8080"))
			g.Expect(m.HealthProbeBindAddress).To(Equal(":8081"))
			g.Expect(m.WebhookBindAddress).To(Equal(":9090"))
			g.Expect(m.BootstrapCASecret).To(Equal(namespace + "/hyperfleet-bootstrap-ca"))
			g.Expect(m.WorkloadReaderServiceAccount).To(Equal(namespace + "/hyperfleet-workload-reader"))
			g.Expect(m.TrustDomain).To(Equal("hyperfleet.local"))
			// The workload-reader ServiceAccount the manager names is the one the install creates.
			find(t, objs, "ServiceAccount", strings.SplitN(m.WorkloadReaderServiceAccount, "/", 2)[1])
		})
	}
}

// TestBootstrapServiceFlagsExist checks every flag the installs pass to the bootstrap service is one
// cmd/bootstrap-service defines.
func TestBootstrapServiceFlagsExist(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(env.RepoRoot, "cmd", "bootstrap-service", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, m := range regexp.MustCompile(`fs\.[A-Za-z]+\(\s*(?:&?[A-Za-z.]+,\s*)?"([a-z0-9-]+)"`).FindAllStringSubmatch(string(src), -1) {
		defined[m[1]] = true
	}
	NewWithT(t).Expect(defined).To(HaveKey("listen"), "could not read the flags of cmd/bootstrap-service")
	for name, manifests := range map[string][]byte{
		"kustomize":  kustomize(t, "config/default"),
		"clusterctl": mustRead(t, filepath.Join(releaseDir(t), "bootstrap-components.yaml")),
		"helm": run(t, nil, nil, helmBinary(t), "template", "hyperfleet", chart, "--namespace", namespace,
			"--set", "bootstrapService.dnsNames[0]=a.example.com,bootstrapService.ips[0]=192.0.2.1"),
		"kustomize (SPIRE)": kustomize(t, "config/spire"),
		"helm (SPIRE)": run(t, nil, nil, helmBinary(t), "template", "hyperfleet", chart, "--namespace", namespace,
			"--set", "bootstrapService.spire.enabled=true"),
	} {
		c := container(t, deployment(t, find(t, decode(t, manifests), "Deployment", "hyperfleet-bootstrap-service")), "bootstrap-service")
		for _, a := range c.Args {
			flagName := strings.SplitN(strings.TrimLeft(a, "-"), "=", 2)[0]
			if !defined[flagName] {
				t.Errorf("%s: bootstrap-service has no flag --%s", name, flagName)
			}
		}
	}
}
