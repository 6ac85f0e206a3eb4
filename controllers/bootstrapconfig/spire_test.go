package bootstrapconfig_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/bootstrapconfig"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/pkg/agent"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/spire"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/spire/spiretest"
)

// TestBootstrapConfigWithSPIRE runs the controller against a real spire-server: a config with
// provider SPIRE gets a join token and a registration entry from it, and deleting the config
// removes them again.
func TestBootstrapConfigWithSPIRE(t *testing.T) {
	serverBin, agentBin := spiretest.Bins(t)
	dir, err := os.MkdirTemp("", "hf-spire-")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	td := spiffeid.RequireTrustDomainFromString("hyperfleet.test")
	server := spiretest.StartServer(t, serverBin, dir, td)
	agentAddress := "127.0.0.1:" + strconv.Itoa(server.Port)
	servers := &spire.Provisioners{Config: spire.Config{Selectors: []string{spiretest.UIDSelectorString()}}}
	t.Cleanup(func() { _ = servers.Close() })
	startBootstrapControllerWith(t, newCANamespace(t), func(r *bootstrapconfig.Reconciler) {
		r.SPIREProvisioner = func(ctx context.Context, address string) (identity.Provisioner, error) {
			return servers.For(ctx, address)
		}
		r.SPIREServerAddress = server.Address
		r.SPIREAgentServerAddress = agentAddress
		r.SPIREServiceURL = "https://bootstrap.hyperfleet.test:8444"
	})
	ns := controllertest.NewNamespace(t)
	runnerMachine(t, ns, "runner-a", "pool", true, nil)
	spireConfigTTL := func(name string, ttl *metav1.Duration) *bootstrapv1.BootstrapConfig {
		_, bc := runnerMachineInCluster(t, ns, name, "pool", func(bc *bootstrapv1.BootstrapConfig) {
			bc.Spec.Attestation = bootstrapv1.AttestationSpec{Provider: bootstrapv1.IdentitySPIRE, SPIREServerAddress: server.Address,
				JoinTokenTTL: ttl}
		})
		return bc
	}
	spireConfig := func(name string) *bootstrapv1.BootstrapConfig { return spireConfigTTL(name, nil) }
	machineID := func(name string) spiffeid.ID {
		id, err := identity.MachineID(td, ns, name)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		return id
	}
	waitForData := func(g Gomega, bc *bootstrapv1.BootstrapConfig) {
		g.Eventually(func(g Gomega) {
			controllertest.Get(g, bc)
			// What Cluster API reads; the condition may be patched a moment before it.
			g.Expect(bc.Status.DataSecretName).NotTo(BeNil(), "%v", bc.Status.Conditions)
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	}

	t.Run("the join token is spire-agent's and the entry gives the VM its machine ID", func(t *testing.T) {
		g := NewWithT(t)
		bc := spireConfig("runner-b")
		waitForData(g, bc)
		g.Expect(controllerutil.ContainsFinalizer(bc, bootstrapv1.SPIREFinalizer)).To(BeTrue())
		g.Expect(bc.Status.SPIFFEID).To(Equal(machineID("runner-b").String()))
		g.Expect(bc.Status.JoinToken).To(BeNil(), "SPIRE keeps its tokens; the API server keeps no hash")
		entries := server.Entries(t, machineID("runner-b"))
		g.Expect(entries).To(HaveLen(1))

		secret := &corev1.Secret{}
		g.Expect(controllertest.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: *bc.Status.DataSecretName}, secret)).To(Succeed())
		userData := string(secret.Data["value"])
		token := entries[0].ParentId.Path[len(spiretest.AgentPath("")):]
		g.Expect(userData).To(ContainSubstring(`join_token = "` + token + `"`))
		g.Expect(userData).To(ContainSubstring(`server_port = "` + strconv.Itoa(server.Port) + `"`))
		cfg, err := agent.ConfigFromUserData([]byte(userData), agent.DefaultConfigPath)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.Attestation).To(Equal(agent.AttestationSPIRE))
		g.Expect(cfg.ServiceURL).To(Equal("https://bootstrap.hyperfleet.test:8444"), "the endpoint presenting an SVID from SPIRE")
		g.Expect(cfg.JoinToken).To(BeEmpty())
		g.Expect(cfg.WorkloadAPIAddress).To(Equal("unix://" + bootstrap.SPIREWorkloadAPISocket))
		bundle, err := server.BundlePEM()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cfg.CABundle).To(Equal(string(bundle)))

		g.Expect(controllertest.Env.Client.Delete(context.Background(), bc)).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(controllertest.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(bc), bc))
		}, 20*time.Second, 100*time.Millisecond).Should(BeTrue())
		g.Expect(server.Entries(t, machineID("runner-b"))).To(BeEmpty(), "the entry went with the config")
	})

	t.Run("once the token expired, a spent one is told from an unused one", func(t *testing.T) {
		g := NewWithT(t)
		ttl := &metav1.Duration{Duration: 4 * time.Second}
		spent, unused := spireConfigTTL("runner-d", ttl), spireConfigTTL("runner-e", ttl)
		waitForData(g, spent)
		waitForData(g, unused)
		g.Expect(conditions.GetReason(spent, bootstrapv1.AttestedCondition)).To(Equal(bootstrapv1.WaitingForAttestationReason))
		entries := server.Entries(t, machineID("runner-d"))
		g.Expect(entries).To(HaveLen(1))
		token := entries[0].ParentId.Path[len(spiretest.AgentPath("")):]
		spiretest.StartAgent(t, "spire-agent-runner-d", agentBin, filepath.Join(dir, "runner-d"), server, token)

		g.Eventually(func(g Gomega) {
			controllertest.Get(g, spent)
			g.Expect(conditions.GetReason(spent, bootstrapv1.AttestedCondition)).To(Equal(bootstrapv1.TokenRedeemedReason))
			controllertest.Get(g, unused)
			g.Expect(conditions.GetReason(unused, bootstrapv1.AttestedCondition)).To(Equal(bootstrapv1.TokenExpiredReason))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	t.Run("a config stays until the SPIRE server has forgotten its machine", func(t *testing.T) {
		g := NewWithT(t)
		bc := spireConfig("runner-c")
		waitForData(g, bc)
		server.Proc.Stop()
		g.Expect(controllertest.Env.Client.Delete(context.Background(), bc)).To(Succeed())
		g.Eventually(func(g Gomega) {
			controllertest.Get(g, bc)
			g.Expect(conditions.GetReason(bc, bootstrapv1.ReadyCondition)).To(Equal(bootstrapv1.SPIREReleaseFailedReason))
		}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
		g.Expect(bc.Finalizers).To(ContainElement(bootstrapv1.SPIREFinalizer))
		// Let the namespace go: an operator who retires the server removes the finalizer.
		patch := client.MergeFrom(bc.DeepCopy())
		bc.Finalizers = nil
		g.Expect(controllertest.Env.Client.Patch(context.Background(), bc, patch)).To(Succeed())
	})
}
