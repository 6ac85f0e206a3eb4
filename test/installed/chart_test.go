package installed

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const chartNS = "hf-chart"

// TestChartRunsInRealPods installs the Helm chart into a fresh namespace that enforces the
// restricted Pod Security Standard, with its defaults and the console enabled against an
// identity provider on a private CA: the manager, both bootstrap services and the console Ready,
// the manager holding its lease there, and a person signing in to the console with a browser;
// upgrades it with a changed setting, which rolls the pods and hands the lease to the new
// manager; then uninstalls it.
func TestChartRunsInRealPods(t *testing.T) {
	g := NewWithT(t)
	helm := filepath.Join(toolsCache, "bin", "helm")
	kubectl(t, nil, "apply", "--server-side", "-f", filepath.Join(tools.CAPIDir, "crds"))
	kubectl(t, nil, "create", "namespace", chartNS)
	kubectl(t, nil, "label", "namespace", chartNS, "pod-security.kubernetes.io/enforce=restricted")
	console := startConsoleWorld(t)
	start := time.Now()
	out, err := exec.Command(helm, append([]string{"install", "hf", filepath.Join(repoRoot, "charts", "hyperfleet"),
		"--namespace", chartNS, "--kubeconfig", theNode.AdminKubeconfig}, console.helmValues(t)...)...).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "helm install: %s", out)
	waitAvailable(t, chartNS, 3*time.Minute)
	expectPodsReady(t, chartNS, time.Time{}, 4, "the manager, two bootstrap services and the console")
	expectLeaseHeld(t, chartNS, start)
	t.Logf("helm install: every pod Ready and the lease held %.1fs later", time.Since(start).Seconds())
	before := expectLeaseHeld(t, chartNS, start)

	start = time.Now()
	exposeConsole(t, chartNS, "hf")
	console.signIn(t)
	t.Logf("console: signed in with a browser through the chart's console Service in %.1fs", time.Since(start).Seconds())

	// A changed setting rolls the pods that read it (the chart's config checksum), and the new
	// manager takes the lease over.
	start = time.Now()
	out, err = exec.Command(helm, "upgrade", "hf", filepath.Join(repoRoot, "charts", "hyperfleet"), "--reuse-values",
		"--set", "manager.logLevel=DEBUG", "--wait", "--timeout", "3m",
		"--namespace", chartNS, "--kubeconfig", theNode.AdminKubeconfig).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "helm upgrade: %s", out)
	g.Expect(kubectl(t, nil, "-n", chartNS, "get", "configmap", "-l", "app.kubernetes.io/instance=hf", "-o",
		"jsonpath={.items[*].data.LOG_LEVEL}")).To(ContainSubstring("DEBUG"))
	g.Eventually(func() string { return expectLeaseHeld(t, chartNS, start) }, 3*time.Minute, time.Second).
		ShouldNot(Equal(before), "a new manager pod, reading the new setting, holds the lease")
	expectPodsReady(t, chartNS, time.Time{}, 4, "the manager, two bootstrap services and the console")
	t.Logf("helm upgrade: the pods rolled and the new manager held the lease %.1fs later", time.Since(start).Seconds())

	out, err = exec.Command(helm, "uninstall", "hf", "--namespace", chartNS, "--kubeconfig", theNode.AdminKubeconfig, "--wait").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "helm uninstall: %s", out)
	g.Expect(kubectl(t, nil, "-n", chartNS, "get", "deployments", "-o", "name")).To(BeEmpty(), "helm uninstall removes the Deployments")
}
