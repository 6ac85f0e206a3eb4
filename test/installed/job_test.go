package installed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
)

// The NodePorts the test exposes the release's Services on, at the node's address on the pod
// bridge (kube-proxy serves NodePorts only there): VMs reach the bootstrap service, and the CI
// platform the webhook receiver, from outside the cluster network, as they would on a user's
// cluster through a NodePort or a LoadBalancer.
const (
	bootstrapNodePort = "30443"
	webhookNodePort   = "30090"
)

// TestOneJobThroughThePods runs one GitHub Actions job end to end through the release that
// `clusterctl init` installed, every HyperFleet process in its pod: the Proxmox simulator and the
// fake GitHub run on this machine at the node's bridge address (where the pods reach them), the
// runner fleet is applied with kubectl's credentials as a person would, the fake GitHub's signed
// workflow_job webhook reaches the manager's receiver through its Service, the manager clones a
// VM on the simulator, the VM's agent attests to the bootstrap service through its Service and
// runs the job, the VM powers off and is destroyed, and the pool returns to its floor of none.
func TestOneJobThroughThePods(t *testing.T) {
	g := NewWithT(t)
	installRelease(t)
	gw := theNode.Gateway.String()

	// The webhook receiver turns on when its Secret exists (config/manager/manager.yaml): create
	// it and restart the manager, as docs/install.md tells a user who adds it after installing.
	secret := randomHex(t, 20)
	kubectl(t, nil, "-n", systemNS, "create", "secret", "generic", "hyperfleet-github-webhook", "--from-literal=secret="+secret)
	kubectl(t, nil, "-n", systemNS, "rollout", "restart", "deployment", "hyperfleet-controller-manager")
	kubectl(t, nil, "-n", systemNS, "rollout", "status", "deployment", "hyperfleet-controller-manager", "--timeout=180s")
	nodePort := func(service, port, name string) {
		kubectl(t, nil, "-n", systemNS, "patch", "service", service, "--type=merge", "-p", fmt.Sprintf(
			`{"spec":{"type":"NodePort","ports":[{"name":%q,"port":%s,"targetPort":%q,"protocol":"TCP","nodePort":%s}]}}`,
			name, port, name, map[string]string{"https": bootstrapNodePort, "webhook": webhookNodePort}[name]))
	}
	nodePort("hyperfleet-bootstrap-service", "8443", "https")
	nodePort("hyperfleet-webhook-receiver", "9090", "webhook")
	expectLeaseHeld(t, systemNS, time.Time{})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	fleet, err := devfleet.Start(ctx, devfleet.Options{
		StateDir: t.TempDir(), Namespace: "runners",
		Pool:        devfleet.PoolOptions{Min: 0, Max: 2},
		JobDuration: 2 * time.Second,
		Installed: &devfleet.Installed{
			Kubeconfig: theNode.AdminKubeconfig, ListenIP: gw,
			WebhookURL:    "http://" + net.JoinHostPort(gw, webhookNodePort) + "/webhooks/github",
			WebhookSecret: secret,
		},
		Progress: func(s string) { t.Log(s) },
	})
	g.Expect(err).NotTo(HaveOccurred())
	defer fleet.Stop()
	t.Logf("the outside world up and the runner fleet applied in %.1fs", time.Since(start).Seconds())

	// The fleet's Cluster is provisioned by the pods' controllers (Cluster API's and HyperFleet's).
	g.Eventually(func() string {
		return kubectl(t, nil, "-n", "runners", "get", "hypervisorcluster", devfleet.HypervisorClusterName, "-o",
			`jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	}, 3*time.Minute, 2*time.Second).Should(Equal("True"), "the manager in its pod reaches the Proxmox simulator")

	start = time.Now()
	created, err := devfleet.CreateJobs(ctx, &fleet.State, devfleet.JobRequest{Count: 1, Labels: devfleet.DefaultLabels})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(HaveLen(1))
	var job devfleet.Job
	g.Eventually(func(g Gomega) {
		jobs, err := devfleet.ListJobs(ctx, &fleet.State)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(jobs).To(HaveLen(1))
		job = jobs[0]
		g.Expect(job.Status).To(Equal("completed"))
	}, 5*time.Minute, 2*time.Second).Should(Succeed(), "the job runs on a VM the pods made")
	ran := time.Since(start)
	g.Expect(job.Conclusion).NotTo(BeNil())
	g.Expect(*job.Conclusion).To(Equal("success"))
	g.Expect(job.Acquisitions).To(Equal(1), "one runner took the job, once")
	g.Expect(job.RunnerName).NotTo(BeNil())

	// The VM goes once it powers off, and the pool returns to its floor: no Machine, no VM.
	g.Eventually(func(g Gomega) {
		vms, err := devfleet.ListVMs(ctx, &fleet.State)
		g.Expect(err).NotTo(HaveOccurred())
		owned, _ := devfleet.SplitVMs(vms)
		g.Expect(owned).To(BeEmpty(), "the job's VM is destroyed")
		g.Expect(kubectl(t, nil, "-n", "runners", "get", "machines", "-o", "name")).To(BeEmpty())
	}, 3*time.Minute, 2*time.Second).Should(Succeed())
	t.Logf("job queued to completed in %.1fs on runner %s; its VM destroyed and the pool at its floor %.1fs after the job was queued",
		ran.Seconds(), *job.RunnerName, time.Since(start).Seconds())
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
