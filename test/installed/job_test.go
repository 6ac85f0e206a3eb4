package installed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

var (
	fleetOnce sync.Once
	// fleet is the outside world of the jobs' tests, once for the package; TestMain stops it.
	fleet    *devfleet.Fleet
	fleetErr string
	// fleetDir keeps the fleet's state and logs (the simulator's, each VM's agent's and runner's).
	fleetDir = filepath.Join(os.TempDir(), fmt.Sprintf("hf-installed-fleet-%d", os.Getpid()))
)

// exposeAsNodePorts gives the bootstrap service and the webhook receiver NodePort Services of
// their own beside the release's, selecting the same pods: what a user who exposes them this way
// would do, as Services of the user's own outlive `clusterctl delete` and `clusterctl upgrade`,
// which replace the release's.
func exposeAsNodePorts(t *testing.T) {
	t.Helper()
	kubectl(t, []byte(nodePortService("vm-bootstrap", systemNS, "", "bootstrap-service", "https", bootstrapNodePort)+"---\n"+
		nodePortService("ci-webhooks", systemNS, "", "manager", "webhook", webhookNodePort)), "apply", "-f", "-")
}

// nodePortService is a NodePort Service of its own selecting one component's pods of an
// installation (of a Helm release's instance, when set), on the port named targetPort.
func nodePortService(name, namespace, instance, component, targetPort, nodePort string) string {
	selector := "    app.kubernetes.io/name: hyperfleet\n    app.kubernetes.io/component: " + component + "\n"
	if instance != "" {
		selector += "    app.kubernetes.io/instance: " + instance + "\n"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: %s
spec:
  type: NodePort
  selector:
%s  ports:
  - port: %s
    targetPort: %s
    nodePort: %s
`, name, namespace, selector, nodePort, targetPort, nodePort)
}

// installedFleet exposes the release that `clusterctl init` installed to the CI platform and the
// VMs, and starts their world, once for the package: the webhook Secret created and the manager
// restarted (as docs/install.md tells a user who adds it after installing), the bootstrap service
// and the webhook receiver exposed as NodePorts, the Proxmox simulator and the fake GitHub on this machine
// at the node's bridge address (where the pods reach them), and the sample runner fleet (a pool of
// none to three) applied with an administrator's kubeconfig, as a person would.
func installedFleet(t *testing.T) *devfleet.Fleet {
	t.Helper()
	installRelease(t)
	fleetOnce.Do(func() {
		ok := t.Run("fleet", func(t *testing.T) {
			g := NewWithT(t)
			gw := theNode.Gateway.String()
			secret := randomHex(t, 20)
			kubectl(t, nil, "-n", systemNS, "create", "secret", "generic", "hyperfleet-github-webhook", "--from-literal=secret="+secret)
			kubectl(t, nil, "-n", systemNS, "rollout", "restart", "deployment", "hyperfleet-controller-manager")
			kubectl(t, nil, "-n", systemNS, "rollout", "status", "deployment", "hyperfleet-controller-manager", "--timeout=180s")
			exposeAsNodePorts(t)
			expectLeaseHeld(t, systemNS, time.Time{})

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			start := time.Now()
			var err error
			fleet, err = devfleet.Start(ctx, devfleet.Options{
				StateDir: fleetDir, Namespace: "runners",
				Pool:        devfleet.PoolOptions{Min: 0, Max: 3},
				JobDuration: 2 * time.Second,
				Installed: &devfleet.Installed{
					Kubeconfig: theNode.AdminKubeconfig, ListenIP: gw,
					WebhookURL:    "http://" + net.JoinHostPort(gw, webhookNodePort) + "/webhooks/github",
					WebhookSecret: secret,
				},
				Progress: func(s string) { t.Log(s) },
			})
			g.Expect(err).NotTo(HaveOccurred())
			t.Logf("the outside world up and the runner fleet applied in %.1fs", time.Since(start).Seconds())
			// The fleet's Cluster is provisioned by the pods' controllers (Cluster API's and HyperFleet's).
			g.Eventually(func() string {
				return kubectl(t, nil, "-n", "runners", "get", "hypervisorcluster", devfleet.HypervisorClusterName, "-o",
					`jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
			}, 3*time.Minute, 2*time.Second).Should(Equal("True"), "the manager in its pod reaches the Proxmox simulator")
		})
		if !ok {
			fleetErr = "starting the runner fleet failed"
		}
	})
	if fleetErr != "" {
		t.Fatal(fleetErr)
	}
	return fleet
}

// stopFleet stops the jobs' world if a test started it (TestMain, before the node stops).
func stopFleet() {
	if fleet != nil {
		fleet.Stop()
	}
	_ = os.RemoveAll(fleetDir)
}

// TestOneJobThroughThePods runs one GitHub Actions job end to end through the release that
// `clusterctl init` installed, every HyperFleet process in its pod: the fake GitHub's signed
// workflow_job webhook reaches the manager's receiver through its Service, the manager clones a
// VM on the simulator, the VM's agent attests to the bootstrap service through its Service and
// runs the job, the VM powers off and is destroyed, and the pool returns to its floor of none.
// The manager in its pod, with the release's RBAC and its default job history (SQLite on its own
// volume), seals the job's record: it makes the installation's provenance key and publishes its
// public half, and the pool says its records are written.
func TestOneJobThroughThePods(t *testing.T) {
	f := installedFleet(t)
	start := time.Now()
	jobs := runJobs(t, f, 1, nil)
	t.Logf("job queued to completed in %.1fs on runner %s", jobs[0].CompletedAt.Sub(*jobs[0].CreatedAt).Seconds(), *jobs[0].RunnerName)
	expectFloor(t, f)
	t.Logf("its VM destroyed and the pool at its floor %.1fs after the job was queued", time.Since(start).Seconds())
	g := NewWithT(t)
	g.Eventually(func() string {
		return kubectl(t, nil, "-n", systemNS, "get", "configmap", "hyperfleet-provenance-public-key", "--ignore-not-found",
			"-o", `jsonpath={.data.public\.pem}`)
	}, 2*time.Minute, 2*time.Second).Should(HavePrefix("-----BEGIN PUBLIC KEY-----"), "the manager sealed the job's record with a key of its own")
	g.Eventually(func() string {
		return kubectl(t, nil, "-n", f.State.Namespace, "get", "runnerpool", f.State.Pool, "-o",
			`jsonpath={.status.conditions[?(@.type=="HistoryRecorded")].status}`)
	}, 2*time.Minute, 2*time.Second).Should(Equal("True"), "the pool says its jobs' records are written")
}

// TestJobsSurviveThePodsFaults queues a burst of jobs and, while their VMs are cloned and attest,
// deletes the manager's pod and one of the bootstrap service's: the Deployments replace them,
// every job runs exactly once and succeeds, and every VM goes: none leaked, none duplicated (a
// duplicate would idle as a registered runner and keep the pool above its floor).
func TestJobsSurviveThePodsFaults(t *testing.T) {
	f := installedFleet(t)
	g := NewWithT(t)
	start := time.Now()
	runJobs(t, f, 6, func() {
		// As soon as the first VM exists: the burst is being served.
		waitFirstVM(t, f)
		manager := expectLeaseHeld(t, systemNS, time.Time{})
		bootstrap := strings.Fields(kubectl(t, nil, "-n", systemNS, "get", "pods", "-l", "app.kubernetes.io/component=bootstrap-service",
			"-o", "jsonpath={.items[*].metadata.name}"))
		g.Expect(bootstrap).NotTo(BeEmpty())
		kubectl(t, nil, "-n", systemNS, "delete", "pod", manager, bootstrap[0], "--wait=false")
		t.Logf("deleted the manager's pod %s and the bootstrap service's %s %.1fs into the burst", manager, bootstrap[0], time.Since(start).Seconds())
	})
	t.Logf("6 jobs queued to all completed in %.1fs across the faults", time.Since(start).Seconds())
	expectFloor(t, f)
	expectAllReady(t, systemNS, time.Time{})
}

// runJobs queues n jobs of the sample pool's labels, calls during (if set) once they are queued,
// and waits until every one has completed successfully, taken once by one runner.
func runJobs(t *testing.T, f *devfleet.Fleet, n int, during func()) []devfleet.Job {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	created, err := devfleet.CreateJobs(ctx, &f.State, devfleet.JobRequest{Count: n, Labels: devfleet.DefaultLabels, Name: t.Name()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(created).To(HaveLen(n))
	ids := map[int64]bool{}
	for _, j := range created {
		ids[j.ID] = true
	}
	if during != nil {
		during()
	}
	var mine []devfleet.Job
	g.Eventually(func(g Gomega) {
		all, err := devfleet.ListJobs(ctx, &f.State)
		g.Expect(err).NotTo(HaveOccurred())
		mine = mine[:0]
		for _, j := range all {
			if ids[j.ID] {
				mine = append(mine, j)
			}
		}
		g.Expect(mine).To(HaveLen(n))
		for _, j := range mine {
			g.Expect(j.Status).To(Equal("completed"), "job %d", j.ID)
		}
	}, 6*time.Minute, 2*time.Second).Should(Succeed(), "every job runs on a VM the pods made")
	for _, j := range mine {
		g.Expect(j.Conclusion).NotTo(BeNil())
		g.Expect(*j.Conclusion).To(Equal("success"), "job %d", j.ID)
		g.Expect(j.Acquisitions).To(Equal(1), "job %d taken by one runner, once", j.ID)
		g.Expect(j.RunnerName).NotTo(BeNil())
	}
	return mine
}

// expectFloor waits until the pool is back at its floor of none: no Machine, no VM of HyperFleet's.
func expectFloor(t *testing.T, f *devfleet.Fleet) {
	t.Helper()
	start, last := time.Now(), ""
	NewWithT(t).Eventually(func(g Gomega) {
		vms, err := devfleet.ListVMs(context.Background(), &f.State)
		g.Expect(err).NotTo(HaveOccurred())
		owned, _ := devfleet.SplitVMs(vms)
		machines := kubectl(t, nil, "-n", "runners", "get", "machines", "-o", "name")
		if now := fmt.Sprintf("%d VMs, machines %q", len(owned), machines); now != last {
			t.Logf("floor: %s after %.1fs", now, time.Since(start).Seconds())
			last = now
		}
		g.Expect(owned).To(BeEmpty(), "every job's VM is destroyed")
		g.Expect(machines).To(BeEmpty())
	}, 3*time.Minute, 2*time.Second).Should(Succeed())
	t.Logf("pool at its floor %.1fs after the jobs completed", time.Since(start).Seconds())
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// waitFirstVM waits until HyperFleet has a VM on the simulator: a burst is being served.
func waitFirstVM(t *testing.T, f *devfleet.Fleet) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		vms, err := devfleet.ListVMs(context.Background(), &f.State)
		g.Expect(err).NotTo(HaveOccurred())
		owned, _ := devfleet.SplitVMs(vms)
		g.Expect(owned).NotTo(BeEmpty())
	}, 2*time.Minute, 200*time.Millisecond).Should(Succeed())
}
