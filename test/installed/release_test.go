package installed

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const systemNS = "hyperfleet-system"

// TestReleaseRunsInRealPods applies the clusterctl release's infrastructure and bootstrap
// components as clusterctl renders them, and expects every pod Ready in a namespace that enforces
// the restricted Pod Security Standard, the manager holding its leader lease under the release's
// own RBAC, and /metrics served only to whom the release's metrics-reader role is bound.
func TestReleaseRunsInRealPods(t *testing.T) {
	g := NewWithT(t)
	installRelease(t)
	g.Expect(kubectl(t, nil, "get", "namespace", systemNS, "-o", `jsonpath={.metadata.labels.pod-security\.kubernetes\.io/enforce}`)).
		To(Equal("restricted"), "the release's namespace enforces the restricted Pod Security Standard")
	expectAllReady(t, systemNS, time.Time{})
	managerPod := expectLeaseHeld(t, systemNS, time.Time{})

	// /metrics: HTTPS with the API server's authentication and authorization. The pod's address
	// is read on every try: after the node restarts (faults_test.go), a Running pod's sandbox is
	// recreated and its status carries no address until the kubelet reports the new one.
	kubectl(t, nil, "create", "namespace", "metrics-probe")
	kubectl(t, nil, "-n", "metrics-probe", "create", "serviceaccount", "reader")
	kubectl(t, nil, "-n", "metrics-probe", "create", "serviceaccount", "stranger")
	kubectl(t, nil, "create", "clusterrolebinding", "metrics-probe-reader", "--clusterrole=hyperfleet-metrics-reader", "--serviceaccount=metrics-probe:reader")
	reader := kubectl(t, nil, "-n", "metrics-probe", "create", "token", "reader")
	stranger := kubectl(t, nil, "-n", "metrics-probe", "create", "token", "stranger")
	// The serving certificate is the manager's own self-signed one; what is tested here is who
	// may read, not the certificate.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec
	status := func(token string) int {
		podIP := kubectl(t, nil, "-n", systemNS, "get", "pod", managerPod, "-o", "jsonpath={.status.podIP}")
		if podIP == "" {
			t.Logf("pod %s has no address yet", managerPod)
			return 0
		}
		metrics := fmt.Sprintf("https://%s:8080/metrics", podIP)
		req, _ := http.NewRequest(http.MethodGet, metrics, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Logf("GET %s: %v", metrics, err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	g.Eventually(func() int { return status(reader) }, 60*time.Second, time.Second).Should(Equal(http.StatusOK), "the metrics reader reads")
	g.Expect(status("")).To(Equal(http.StatusUnauthorized), "no token: 401")
	g.Expect(status(stranger)).To(Equal(http.StatusForbidden), "a service account without the role: 403")
}

var (
	installOnce sync.Once
	installErr  string
)

// installRelease runs `clusterctl init --infrastructure hyperfleet --bootstrap hyperfleet` once
// for the package, from a local repository holding the release, Cluster API's core and kubeadm
// control plane and cert-manager, and waits for every provider to be Available.
func installRelease(t *testing.T) {
	t.Helper()
	installOnce.Do(func() {
		ok := t.Run("clusterctl-init", func(t *testing.T) {
			start := time.Now()
			clusterctlInit(t, localRepository(t, third, t.TempDir()), releaseVariables()...)
			t.Logf("clusterctl init: cert-manager issuing and every provider Available %.1fs after it started", time.Since(start).Seconds())
		})
		if !ok {
			installErr = "clusterctl init failed"
		}
	})
	if installErr != "" {
		t.Fatal(installErr)
	}
}

// expectAllReady waits until every pod of the release is Ready with an address and there are
// exactly the release's replicas: the manager and two bootstrap services. With a non-zero since,
// every container must also have started at or after it: after a node restart a pod's status
// keeps saying Ready until the kubelet has looked again, and that stale answer does not count.
func expectAllReady(t *testing.T, ns string, since time.Time) {
	t.Helper()
	expectPodsReady(t, ns, since, 3, "the manager and two bootstrap services")
}

// expectPodsReady is expectAllReady for a namespace of n pods (what names them).
func expectPodsReady(t *testing.T, ns string, since time.Time, n int, what string) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		var pods struct {
			Items []struct {
				Metadata struct{ Name string }
				Status   struct {
					PodIP      string `json:"podIP"`
					Conditions []struct{ Type, Status string }
					// ContainerStatuses' running start times, as the kubelet last reported them.
					ContainerStatuses []struct {
						State struct {
							Running *struct {
								StartedAt time.Time `json:"startedAt"`
							}
						}
					} `json:"containerStatuses"`
				}
			}
		}
		g.Expect(json.Unmarshal([]byte(kubectl(t, nil, "-n", ns, "get", "pods", "-o", "json")), &pods)).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(n), what)
		for _, p := range pods.Items {
			ready := false
			for _, c := range p.Status.Conditions {
				ready = ready || (c.Type == "Ready" && c.Status == "True")
			}
			g.Expect(ready).To(BeTrue(), "pod %s is Ready", p.Metadata.Name)
			g.Expect(p.Status.PodIP).NotTo(BeEmpty(), "pod %s has an address", p.Metadata.Name)
			g.Expect(p.Status.ContainerStatuses).NotTo(BeEmpty(), "pod %s reports its containers", p.Metadata.Name)
			for _, c := range p.Status.ContainerStatuses {
				g.Expect(c.State.Running).NotTo(BeNil(), "pod %s's containers run", p.Metadata.Name)
				g.Expect(c.State.Running.StartedAt.Before(since.Truncate(time.Second))).To(BeFalse(),
					"pod %s's containers started after %s", p.Metadata.Name, since.Format(time.RFC3339))
			}
		}
	}, 3*time.Minute, time.Second).Should(Succeed())
}

// expectLeaseHeld waits until the running manager pod holds the leader lease, renewed at or
// after since, and returns its name.
func expectLeaseHeld(t *testing.T, ns string, since time.Time) string {
	t.Helper()
	g := NewWithT(t)
	var managerPod string
	g.Eventually(func(g Gomega) {
		managerPod = kubectl(t, nil, "-n", ns, "get", "pods", "-l", "app.kubernetes.io/component=manager",
			"--field-selector=status.phase=Running", "-o", "jsonpath={.items[*].metadata.name}")
		g.Expect(strings.Fields(managerPod)).To(HaveLen(1))
		holder := kubectl(t, nil, "-n", ns, "get", "lease", "hyperfleet-manager.hyperfleet.io", "-o", "jsonpath={.spec.holderIdentity}", "--ignore-not-found")
		g.Expect(holder).To(HavePrefix(managerPod+"_"), "the running manager pod holds the leader lease")
		renewed, err := time.Parse(time.RFC3339Nano, kubectl(t, nil, "-n", ns, "get", "lease", "hyperfleet-manager.hyperfleet.io", "-o", "jsonpath={.spec.renewTime}"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(renewed.Before(since)).To(BeFalse(), "the lease was renewed after %s", since.Format(time.RFC3339))
	}, 3*time.Minute, time.Second).Should(Succeed())
	return managerPod
}
