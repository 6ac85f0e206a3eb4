package security

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/controllers"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/manager"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

// listeners are the addresses of a manager's metrics (HTTPS, authenticated) and health listeners.
type listeners struct{ metrics, health string }

// startManagerListening runs the manager as shipped (metrics over HTTPS with authentication and
// authorization) with its metrics and health listeners on loopback, until the test ends, and waits
// until it reports ready.
func startManagerListening(t *testing.T) listeners {
	t.Helper()
	g := NewWithT(t)
	l := listeners{metrics: freeLoopback(t), health: freeLoopback(t)}
	cfg := &config.Manager{
		MetricsBindAddress: l.metrics, MetricsSecure: true, HealthProbeBindAddress: l.health,
		WebhookBindAddress: "0", Concurrency: 2,
		SyncPeriod: time.Minute, SweepInterval: time.Second, OrphanGracePeriod: time.Minute,
		ProviderTimeout: 5 * time.Second, LeaderElectionID: "hyperfleet-security-test",
		BootstrapCASecret: inst.CASecret.String(), TrustDomain: "hyperfleet.local",
		BootstrapServiceURL: "https://127.0.0.1:8443", RepairInterval: time.Hour,
		WorkloadReaderServiceAccount: inst.WorkloadReader.String(),
	}
	mgr, err := manager.New(context.Background(), inst.Manager, cfg, func(o *controllers.Options) { o.Testing.SkipNameValidation = true })
	g.Expect(err).NotTo(HaveOccurred())
	testenv.RunManager(t, mgr)
	g.Eventually(func() int { return status(t, http.DefaultClient, "http://"+l.health+"/readyz", "") }, time.Minute, 200*time.Millisecond).Should(Equal(http.StatusOK))
	return l
}

func freeLoopback(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scraper trusts the metrics listener's self-signed certificate, as the shipped ServiceMonitor does,
// and speaks HTTP/1.1.
var scraper = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// status is the status code of a GET of url with bearer token (none if empty), 0 if it failed.
func status(t *testing.T, c *http.Client, url, token string, header ...string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// serviceAccountToken creates ServiceAccount name in the installation's namespace, binds it to
// clusterRole (none if empty) and returns a token of it.
func serviceAccountToken(t *testing.T, name, clusterRole string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: inst.Namespace, Name: name}}
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, sa))).To(Succeed())
	if clusterRole != "" {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + clusterRole},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: inst.Namespace, Name: name}},
		}
		g.Expect(client.IgnoreAlreadyExists(env.Client.Create(ctx, crb))).To(Succeed())
	}
	cfg, _, err := env.ServiceAccountConfig(ctx, types.NamespacedName{Namespace: inst.Namespace, Name: name}, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	return cfg.BearerToken
}

// TestManagerListenersAreLimited plays an unauthenticated client that reaches the manager's metrics
// and health ports: headers sent a byte at a time hold no connection past the 5s header timeout,
// oversized headers are refused with 431, and meanwhile probes and authorized scrapes are answered.
// The metrics endpoint still serves only tokens bound to hyperfleet-metrics-reader (the manager's
// own TokenReview and SubjectAccessReview run with the installation's shipped RBAC).
func TestManagerListenersAreLimited(t *testing.T) {
	l := startManagerListening(t)
	reader := serviceAccountToken(t, "metrics-scraper", "hyperfleet-metrics-reader")
	stranger := serviceAccountToken(t, "metrics-stranger", "")
	metricsURL, healthURL := "https://"+l.metrics+"/metrics", "http://"+l.health

	t.Run("metrics authorization", func(t *testing.T) {
		for _, tc := range []struct {
			name, token string
			want        int
		}{
			{"no token", "", http.StatusUnauthorized},
			// controller-runtime's filter answers a token the TokenReview rejects with 500.
			{"forged token", "not-a-token", http.StatusInternalServerError},
			{"token without metrics-reader", stranger, http.StatusForbidden},
			{"token with metrics-reader", reader, http.StatusOK},
		} {
			t.Run(tc.name, func(t *testing.T) {
				g := NewWithT(t)
				g.Eventually(func() int { return status(t, scraper, metricsURL, tc.token) }, 30*time.Second, 500*time.Millisecond).Should(Equal(tc.want))
			})
		}
		g := NewWithT(t)
		conn, err := tls.Dial("tcp", l.metrics, &tls.Config{InsecureSkipVerify: true})
		g.Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
		cert := conn.ConnectionState().PeerCertificates[0]
		g.Expect(cert.DNSNames).To(ContainElement("localhost"), "the self-signed certificate controller-runtime serves")
	})

	t.Run("health checks", func(t *testing.T) {
		g := NewWithT(t)
		for path, want := range map[string]int{"/healthz": 200, "/healthz/ping": 200, "/readyz": 200, "/readyz/informers": 200, "/readyz/nonexistent": 404} {
			g.Expect(status(t, http.DefaultClient, healthURL+path, "")).To(Equal(want), path)
		}
	})

	t.Run("oversized header", func(t *testing.T) {
		g := NewWithT(t)
		pad := strings.Repeat("a", 64<<10)
		g.Expect(status(t, scraper, metricsURL, reader, "X-Pad", pad)).To(Equal(http.StatusRequestHeaderFieldsTooLarge))
		g.Expect(status(t, http.DefaultClient, healthURL+"/healthz", "", "X-Pad", pad)).To(Equal(http.StatusRequestHeaderFieldsTooLarge))
		// A scrape with ordinary headers is still served.
		g.Expect(status(t, scraper, metricsURL, reader)).To(Equal(http.StatusOK))
		// Over HTTP/2 (offered, as controller-runtime does) the listener advertises the same cap: the
		// scrape with ordinary headers is served, the oversized one never is.
		h2 := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		req, err := http.NewRequest(http.MethodGet, metricsURL, nil)
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+reader)
		resp, err := h2.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
		g.Expect(resp.ProtoMajor).To(Equal(2))
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
		g.Expect(status(t, h2, metricsURL, reader, "X-Pad", pad)).NotTo(Equal(http.StatusOK))
	})

	t.Run("slow headers", func(t *testing.T) {
		g := NewWithT(t)
		const perListener = 8
		dial := map[string]func() (net.Conn, error){
			"metrics": func() (net.Conn, error) {
				return tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", l.metrics, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
			},
			"health": func() (net.Conn, error) { return net.DialTimeout("tcp", l.health, 5*time.Second) },
		}
		type cut struct {
			listener string
			after    time.Duration
			err      error
		}
		results := make(chan cut, 2*perListener)
		var wg sync.WaitGroup
		start := time.Now()
		for name, d := range dial {
			for range perListener {
				conn, err := d()
				g.Expect(err).NotTo(HaveOccurred())
				wg.Add(1)
				go func() {
					defer wg.Done()
					results <- cut{name, dripHeaders(conn), nil}
				}()
			}
		}
		// While the slow clients hold their connections, probes and scrapes are answered at once.
		g.Expect(status(t, http.DefaultClient, healthURL+"/healthz", "")).To(Equal(http.StatusOK))
		g.Expect(status(t, scraper, metricsURL, reader)).To(Equal(http.StatusOK))
		g.Expect(time.Since(start)).To(BeNumerically("<", 4*time.Second), "the probes were answered while the slow clients were connected")
		wg.Wait()
		close(results)
		for r := range results {
			// controller-runtime's servers wait 32s for headers; the manager's wait 5s.
			g.Expect(r.after).To(BeNumerically("<", 12*time.Second), "%s listener held a slow client for %s", r.listener, r.after)
		}
	})
}

// dripHeaders sends a request's headers one byte every half second, never ending them, until the
// server closes the connection (or 25s pass), and returns how long the connection was held.
func dripHeaders(conn net.Conn) time.Duration {
	defer conn.Close()
	start := time.Now()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		_ = conn.SetReadDeadline(time.Now().Add(25 * time.Second))
		_, _ = bufio.NewReader(conn).ReadByte() // a 408 or EOF when the server cuts it
	}()
	request := fmt.Sprintf("GET /healthz HTTP/1.1\r\nHost: %s\r\nX-Slow: %s", conn.RemoteAddr(), strings.Repeat("s", 100))
	for i := 0; i < len(request); i++ {
		select {
		case <-closed:
			return time.Since(start)
		case <-time.After(500 * time.Millisecond):
		}
		if _, err := conn.Write([]byte{request[i]}); err != nil {
			break
		}
	}
	<-closed
	return time.Since(start)
}
