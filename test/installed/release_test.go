package installed

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
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
	expectAllReady(t)
	managerPod := expectLeaseHeld(t)

	// /metrics: HTTPS with the API server's authentication and authorization.
	podIP := kubectl(t, nil, "-n", systemNS, "get", "pod", managerPod, "-o", "jsonpath={.status.podIP}")
	metrics := fmt.Sprintf("https://%s:8080/metrics", podIP)
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

// installRelease applies Cluster API's CRDs and the release's components once for the package,
// and waits for every Deployment to be Available.
func installRelease(t *testing.T) {
	t.Helper()
	installOnce.Do(func() {
		ok := t.Run("install", func(t *testing.T) {
			start := time.Now()
			kubectl(t, nil, "apply", "--server-side", "-f", filepath.Join(tools.CAPIDir, "crds"))
			for _, f := range []string{"infrastructure-components.yaml", "bootstrap-components.yaml"} {
				kubectl(t, clusterctlGenerate(t, filepath.Join(release, f)), "apply", "--server-side", "-f", "-")
			}
			out := kubectl(t, nil, "-n", systemNS, "wait", "--for=condition=Available", "deployment", "--all", "--timeout=180s")
			t.Logf("%s\nall deployments Available %.1fs after apply", out, time.Since(start).Seconds())
		})
		if !ok {
			installErr = "installing the release failed"
		}
	})
	if installErr != "" {
		t.Fatal(installErr)
	}
}

// expectAllReady waits until every pod of the release is Ready and there are exactly the
// release's replicas: the manager and two bootstrap services.
func expectAllReady(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func(g Gomega) {
		ready := kubectl(t, nil, "-n", systemNS, "get", "pods", "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		lines := strings.Split(ready, "\n")
		g.Expect(lines).To(HaveLen(3), "the manager and two bootstrap services: %s", ready)
		for _, line := range lines {
			g.Expect(line).To(HaveSuffix("=True"), "every pod of the release is Ready")
		}
	}, 3*time.Minute, time.Second).Should(Succeed())
}

// expectLeaseHeld waits until the running manager pod holds the leader lease and returns its name.
func expectLeaseHeld(t *testing.T) string {
	t.Helper()
	g := NewWithT(t)
	var managerPod string
	g.Eventually(func(g Gomega) {
		managerPod = kubectl(t, nil, "-n", systemNS, "get", "pods", "-l", "app.kubernetes.io/component=manager",
			"--field-selector=status.phase=Running", "-o", "jsonpath={.items[*].metadata.name}")
		g.Expect(strings.Fields(managerPod)).To(HaveLen(1))
		holder := kubectl(t, nil, "-n", systemNS, "get", "lease", "hyperfleet-manager.hyperfleet.io", "-o", "jsonpath={.spec.holderIdentity}", "--ignore-not-found")
		g.Expect(holder).To(HavePrefix(managerPod+"_"), "the running manager pod holds the leader lease")
	}, 3*time.Minute, time.Second).Should(Succeed())
	return managerPod
}
