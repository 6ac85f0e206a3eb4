package installed

import (
	"net"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// The chart's release and the NodePorts the test exposes it on, beside the clusterctl release's.
const (
	helmNS                = "hf-helm"
	helmBootstrapNodePort = "30446"
	helmWebhookNodePort   = "30093"
)

// TestHelmInstallServesTheFleet runs one job end to end through HyperFleet installed by the
// chart. It runs last (its file name sorts last): it removes the HyperFleet that `clusterctl
// init` installed (`clusterctl delete`, which keeps the CRDs, the objects and Cluster API's
// core) and installs the chart in its place, as a platform team that manages its controllers with
// Helm does on a cluster whose Cluster API came from clusterctl. The chart's manager takes the
// sample fleet over; the fake GitHub's signed webhook reaches the chart's receiver through its
// Service, the VM's agent attests to the chart's bootstrap service through its Service, the job
// runs, the VM is destroyed and the pool returns to its floor.
func TestHelmInstallServesTheFleet(t *testing.T) {
	f := installedFleet(t)
	g := NewWithT(t)
	gw := theNode.Gateway.String()
	start := time.Now()
	cmd := exec.Command(tools.Clusterctl(), "delete", "--infrastructure", "hyperfleet", "--bootstrap", "hyperfleet",
		"--kubeconfig", theNode.AdminKubeconfig)
	cmd.Env = append(cmd.Environ(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "XDG_CONFIG_HOME="+t.TempDir(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "clusterctl delete: %s", out)
	g.Eventually(func() string {
		return kubectl(t, nil, "-n", systemNS, "get", "pods", "-o", "name")
	}, 2*time.Minute, time.Second).Should(BeEmpty(), "clusterctl's HyperFleet pods are gone")

	secret := randomHex(t, 20)
	kubectl(t, nil, "create", "namespace", helmNS)
	kubectl(t, nil, "label", "namespace", helmNS, "pod-security.kubernetes.io/enforce=restricted")
	helm := filepath.Join(toolsCache, "bin", "helm")
	out, err = exec.Command(helm, "install", "hf", filepath.Join(repoRoot, "charts", "hyperfleet"),
		"--namespace", helmNS, "--kubeconfig", theNode.AdminKubeconfig,
		"--set", "manager.bootstrapServiceURL=https://"+net.JoinHostPort(gw, helmBootstrapNodePort),
		"--set", "bootstrapService.ips={"+gw+"}", "--set", "manager.webhook.secret="+secret,
		"--set", "manager.sweepInterval=5s", "--set", "manager.repairInterval=15s",
		"--set", "tenantNamespaces={runners}", "--wait", "--timeout", "3m").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "helm install: %s", out)
	expectAllReady(t, helmNS, time.Time{})
	expectLeaseHeld(t, helmNS, start)
	kubectl(t, []byte(nodePortService("vm-bootstrap", helmNS, "hf", "bootstrap-service", "https", helmBootstrapNodePort)+"---\n"+
		nodePortService("ci-webhooks", helmNS, "hf", "manager", "webhook", helmWebhookNodePort)), "apply", "-f", "-")
	f.GitHub.SetWebhook("http://"+net.JoinHostPort(gw, helmWebhookNodePort)+"/webhooks/github", secret)
	t.Logf("clusterctl's HyperFleet replaced by the chart's, every pod Ready and the lease held, in %.1fs", time.Since(start).Seconds())

	start = time.Now()
	jobs := runJobs(t, f, 1, nil)
	t.Logf("job queued to completed in %.1fs on runner %s, through the chart's pods", jobs[0].CompletedAt.Sub(*jobs[0].CreatedAt).Seconds(), *jobs[0].RunnerName)
	expectFloor(t, f)
	t.Logf("its VM destroyed and the pool at its floor %.1fs after the job was queued", time.Since(start).Seconds())
}
