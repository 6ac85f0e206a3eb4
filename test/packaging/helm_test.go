package packaging

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

// helmBinary is hack/helm.sh's build in the tools cache. CI builds it with `make tools`.
func helmBinary(t *testing.T) string {
	t.Helper()
	cache, err := testenv.ToolsCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	helm := filepath.Join(cache, "bin", "helm")
	if _, err := os.Stat(helm); err != nil {
		t.Fatalf("helm not found at %s: run hack/helm.sh (or make tools) first", helm)
	}
	return helm
}

const chart = "charts/hyperfleet"

func TestHelmLint(t *testing.T) {
	helm := helmBinary(t)
	run(t, nil, nil, helm, "lint", "--strict", chart)
	run(t, nil, nil, helm, "lint", "--strict", chart, "--set", "serviceMonitor.enabled=true,grafanaDashboard.enabled=true,bootstrapService.enabled=false")

	// values.schema.json turns typos into errors before anything reaches a cluster.
	for _, bad := range []string{"manager.logLevel=LOUD", "manager.sweepInterval=soon", "manager.replicas=two", "bootstrapService.service.type=Ingress"} {
		out, err := tryRun(nil, nil, helm, "template", "hyperfleet", chart, "--set", bad)
		if err == nil || !strings.Contains(string(out), "schema") {
			t.Errorf("helm template --set %s: want a schema error, got %v\n%s", bad, err, out)
		}
	}
}

// TestHelmPackage renders the packaged chart: the CRDs, the generated manager role and the dashboard
// are links into config/ in the repository and must be real files in the archive.
func TestHelmPackage(t *testing.T) {
	helm := helmBinary(t)
	g := NewWithT(t)
	dir := t.TempDir()
	run(t, nil, nil, helm, "package", chart, "--destination", dir)
	archives, _ := filepath.Glob(filepath.Join(dir, "hyperfleet-*.tgz"))
	g.Expect(archives).To(HaveLen(1))
	objs := decode(t, run(t, nil, nil, helm, "template", "hyperfleet", archives[0], "--namespace", namespace,
		"--include-crds", "--set", "grafanaDashboard.enabled=true"))
	allCRDs, _ := crdNames(t)
	g.Expect(namesOfKind(objs, "CustomResourceDefinition")).To(ConsistOf(allCRDs))
	role := find(t, objs, "ClusterRole", "hyperfleet-manager-role")
	g.Expect(role.Object["rules"]).NotTo(BeEmpty())
	find(t, objs, "ConfigMap", "hyperfleet-grafana-dashboard")
}

func TestHelmTemplate(t *testing.T) {
	helm := helmBinary(t)
	const ns = "hyperfleet-helm"
	restrictedNamespace(t, ns)

	t.Run("defaults", func(t *testing.T) {
		g := NewWithT(t)
		out := run(t, nil, nil, helm, "template", "hyperfleet", chart, "--namespace", ns, "--include-crds")
		objs := decode(t, out)
		allCRDs, _ := crdNames(t)
		g.Expect(namesOfKind(objs, "CustomResourceDefinition")).To(ConsistOf(allCRDs))
		g.Expect(kinds(objs)).NotTo(HaveKey("ServiceMonitor"))

		manager := deployment(t, find(t, objs, "Deployment", "hyperfleet-controller-manager"))
		c := container(t, manager, "manager")
		g.Expect(c.Image).To(Equal("ghcr.io/hyperfleet-io/hyperfleet:v0.1.0"))
		g.Expect(c.Args).To(ContainElement("--leader-elect=true"))
		g.Expect(ports(c)).To(Equal(map[string]int32{"metrics": 8080, "healthz": 8081, "webhook": 9090}))
		hardened(g, manager, c)
		bootstrap := deployment(t, find(t, objs, "Deployment", "hyperfleet-bootstrap-service"))
		g.Expect(*bootstrap.Spec.Replicas).To(Equal(int32(2)))
		bc := container(t, bootstrap, "bootstrap-service")
		g.Expect(bc.Args).To(ContainElements("--listen=:8443", "--ca-secret="+ns+"/hyperfleet-bootstrap-ca",
			"--dns-name=hyperfleet-bootstrap-service."+ns+".svc"))
		hardened(g, bootstrap, bc)
		sameIdentity(t, manager, bootstrap)

		// The manager's ClusterRole is the generated config/rbac/role.yaml, not a hand-kept copy.
		generated := decode(t, mustRead(t, filepath.Join(env.RepoRoot, "config", "rbac", "role.yaml")))[0]
		role := find(t, objs, "ClusterRole", "hyperfleet-manager-role")
		g.Expect(role.Object["rules"]).To(Equal(generated.Object["rules"]))

		noPodSecurityWarnings(t, dryRunApply(t, out))
	})

	t.Run("everything on", func(t *testing.T) {
		apply(t, readTestdata(t, "servicemonitor-crd.yaml"))
		run(t, nil, nil, env.Tools.Kubectl(), "--kubeconfig", env.KubeconfigPath, "wait", "--for=condition=Established",
			"--timeout=60s", "crd/servicemonitors.monitoring.coreos.com")
		g := NewWithT(t)
		out := run(t, nil, nil, helm, "template", "fleet", chart, "--namespace", ns,
			"--set", "serviceMonitor.enabled=true,grafanaDashboard.enabled=true,manager.replicas=2",
			"--set", "manager.logLevel=DEBUG,manager.sweepInterval=1m,manager.bootstrapServiceURL=https://bootstrap.example.com:8443",
			"--set", "bootstrapService.service.type=LoadBalancer,manager.image.tag=v0.1.1",
			"--set", "bootstrapService.dnsNames[0]=bootstrap.example.com,bootstrapService.ips[0]=192.0.2.10")
		objs := decode(t, out)
		g.Expect(kinds(objs)).To(HaveKeyWithValue("ServiceMonitor", 1))
		data, _, _ := unstructured.NestedStringMap(find(t, objs, "ConfigMap", "fleet-hyperfleet-config").Object, "data")
		g.Expect(data).To(HaveKeyWithValue("LOG_LEVEL", "DEBUG"))
		g.Expect(data).To(HaveKeyWithValue("SWEEP_INTERVAL", "1m"))
		g.Expect(data).To(HaveKeyWithValue("BOOTSTRAP_SERVICE_URL", "https://bootstrap.example.com:8443"))
		dashboard := find(t, objs, "ConfigMap", "fleet-hyperfleet-grafana-dashboard")
		dashboardJSON, _, _ := unstructured.NestedString(dashboard.Object, "data", "hyperfleet-dashboard.json")
		g.Expect(dashboardJSON).To(MatchJSON(mustRead(t, filepath.Join(env.RepoRoot, "config", "grafana", "hyperfleet-dashboard.json"))))
		manager := deployment(t, find(t, objs, "Deployment", "fleet-hyperfleet-controller-manager"))
		g.Expect(container(t, manager, "manager").Image).To(HaveSuffix(":v0.1.1"))
		bootstrap := deployment(t, find(t, objs, "Deployment", "fleet-hyperfleet-bootstrap-service"))
		g.Expect(container(t, bootstrap, "bootstrap-service").Args).To(ContainElements(
			"--dns-name=bootstrap.example.com", "--ip=192.0.2.10"))
		noPodSecurityWarnings(t, dryRunApply(t, out))
	})

	t.Run("metrics and webhook off", func(t *testing.T) {
		g := NewWithT(t)
		out := run(t, nil, nil, helm, "template", "hyperfleet", chart, "--namespace", ns,
			"--set", "manager.metrics.port=0,manager.webhook.port=0,bootstrapService.enabled=false,serviceMonitor.enabled=true")
		objs := decode(t, out)
		g.Expect(kinds(objs)).NotTo(HaveKey("ServiceMonitor"))
		g.Expect(kinds(objs)).To(HaveKeyWithValue("Deployment", 1))
		g.Expect(kinds(objs)).NotTo(HaveKey("Service"))
		c := container(t, deployment(t, find(t, objs, "Deployment", "controller-manager")), "manager")
		g.Expect(c.Args).To(ContainElements("--metrics-bind-address=0", "--webhook-bind-address=0"))
		dryRunApply(t, out)
	})
}

// TestHelmMatchesKustomize keeps the two installs describing the same objects.
func TestHelmMatchesKustomize(t *testing.T) {
	helm := helmBinary(t)
	names := func(objs []unstructured.Unstructured) []string {
		var n []string
		for _, o := range objs {
			if o.GetKind() != "Namespace" {
				n = append(n, o.GetKind()+"/"+o.GetName())
			}
		}
		slices.Sort(n)
		return n
	}
	fromHelm := names(decode(t, run(t, nil, nil, helm, "template", "hyperfleet", chart, "--namespace", namespace, "--include-crds")))
	fromKustomize := names(decode(t, kustomize(t, "config/default")))
	NewWithT(t).Expect(fromHelm).To(Equal(fromKustomize))
}
