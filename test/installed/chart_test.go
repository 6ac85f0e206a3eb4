package installed

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const chartNS = "hf-chart"

// TestChartRunsInRealPods installs the Helm chart with its defaults into a fresh namespace that
// enforces the restricted Pod Security Standard: the manager and both bootstrap services Ready,
// the manager holding its lease there; then uninstalls it.
func TestChartRunsInRealPods(t *testing.T) {
	g := NewWithT(t)
	helm := filepath.Join(toolsCache, "bin", "helm")
	kubectl(t, nil, "apply", "--server-side", "-f", filepath.Join(tools.CAPIDir, "crds"))
	kubectl(t, nil, "create", "namespace", chartNS)
	kubectl(t, nil, "label", "namespace", chartNS, "pod-security.kubernetes.io/enforce=restricted")
	start := time.Now()
	out, err := exec.Command(helm, "install", "hf", filepath.Join(repoRoot, "charts", "hyperfleet"),
		"--namespace", chartNS, "--kubeconfig", theNode.AdminKubeconfig).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "helm install: %s", out)
	kubectl(t, nil, "-n", chartNS, "wait", "--for=condition=Available", "deployment", "--all", "--timeout=180s")
	expectAllReady(t, chartNS, time.Time{})
	expectLeaseHeld(t, chartNS, start)
	t.Logf("helm install: every pod Ready and the lease held %.1fs later", time.Since(start).Seconds())

	out, err = exec.Command(helm, "uninstall", "hf", "--namespace", chartNS, "--kubeconfig", theNode.AdminKubeconfig, "--wait").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "helm uninstall: %s", out)
	g.Expect(kubectl(t, nil, "-n", chartNS, "get", "deployments", "-o", "name")).To(BeEmpty(), "helm uninstall removes the Deployments")
}
