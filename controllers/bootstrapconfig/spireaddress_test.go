package bootstrapconfig_test

import (
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/cluster-api/util/conditions"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/bootstrapconfig"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/spire"
)

// countingListener accepts connections on l and counts them.
func countingListener(t *testing.T, l net.Listener) *atomic.Int32 {
	t.Helper()
	var n atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	return &n
}

// TestBootstrapConfigCannotChooseTheSPIREServer plays a user with edit in a namespace who points a
// BootstrapConfig at a host or Unix socket of their choosing as "the SPIRE server": the manager
// must refuse with a condition and never connect there.
func TestBootstrapConfigCannotChooseTheSPIREServer(t *testing.T) {
	dir, err := os.MkdirTemp("", "hf-spa-")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	unixL, err := net.Listen("unix", filepath.Join(dir, "evil.sock"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	tcpL, err := net.Listen("tcp", "127.0.0.1:0")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	unixHits, tcpHits := countingListener(t, unixL), countingListener(t, tcpL)

	servers := &spire.Provisioners{Config: spire.Config{Selectors: []string{"unix:uid:0"}}}
	t.Cleanup(func() { _ = servers.Close() })
	startBootstrapControllerWith(t, newCANamespace(t), func(r *bootstrapconfig.Reconciler) {
		r.SPIREProvisioner = servers.For
		r.SPIREServerAddress = "unix://" + filepath.Join(dir, "own.sock")
		r.SPIREAgentServerAddress = "spire.hyperfleet.test:8081"
		r.SPIREServiceURL = "https://bootstrap.hyperfleet.test:8444"
	})
	ns := controllertest.NewNamespace(t)
	runnerMachine(t, ns, "runner-a", "pool", true, nil)

	tests := []struct {
		name    string
		address string
		hits    *atomic.Int32
	}{
		{name: "another Unix socket", address: "unix://" + filepath.Join(dir, "evil.sock"), hits: unixHits},
		{name: "another host", address: tcpL.Addr().String(), hits: tcpHits},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, bc := runnerMachineInCluster(t, ns, "runner-"+string(rune('b'+i)), "pool", func(bc *bootstrapv1.BootstrapConfig) {
				bc.Spec.Attestation = bootstrapv1.AttestationSpec{Provider: bootstrapv1.IdentitySPIRE, SPIREServerAddress: tt.address}
			})
			g.Eventually(func(g Gomega) {
				controllertest.Get(g, bc)
				g.Expect(conditions.GetReason(bc, bootstrapv1.DataSecretAvailableCondition)).To(Equal(bootstrapv1.SPIREServerNotAllowedReason))
				g.Expect(conditions.GetMessage(bc, bootstrapv1.DataSecretAvailableCondition)).To(ContainSubstring(tt.address))
			}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
			g.Consistently(func(g Gomega) {
				controllertest.Get(g, bc)
				g.Expect(bc.Status.DataSecretName).To(BeNil())
				g.Expect(tt.hits.Load()).To(BeZero(), "the manager connected to %s", tt.address)
			}, 3*time.Second, 100*time.Millisecond).Should(Succeed())
		})
	}
}
