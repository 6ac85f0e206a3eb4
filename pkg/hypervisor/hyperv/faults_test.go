package hyperv

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// TestHostDown: a host whose WinRM listener is gone is a transient failure for its VMs and the
// sweep's listing, shows offline in Nodes, and leaves the cluster usable through the other host.
func TestHostDown(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env := newEnv(t, hvsim.HyperVConfig{}, func(c *Config) { c.Timeout = 3 * time.Second })
	ref := cloneRunner(t, env.p, "hv2", "runner-6", "c6")
	g.Expect(env.sim.Servers["hv2"].Close()).To(Succeed())

	_, err := env.p.Start(ctx, ref)
	g.Expect(err).To(MatchError(hypervisor.ErrTransient))
	g.Expect(hypervisor.IsRetryable(err)).To(BeTrue())
	_, err = env.p.OwnedVMs(ctx)
	g.Expect(err).To(MatchError(hypervisor.ErrTransient), "a partial listing would look like VMs gone")

	nodes, err := env.p.Nodes(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodes[0].Online).To(BeTrue())
	g.Expect(nodes[1]).To(Equal(hypervisor.Node{Name: "hv2"}))
	version, err := env.p.Verify(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(version).To(ContainSubstring("1 of 2 hosts"))
}

// TestWrongCredentials: rejected credentials fail Verify as Unauthorized, not as a host down.
func TestWrongCredentials(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	p := env.provider(t, testInstallation, testCluster, func(c *Config) { c.Password = "Summer2026!" })
	_, err := p.Verify(testCtx(t))
	g.Expect(err).To(MatchError(hypervisor.ErrUnauthorized))
	g.Expect(env.hv.Files("hv1")).To(Equal([]string{templateDisk}), "nothing was deployed")
}

// TestUntrustedCertificate: a host whose certificate the CA bundle does not sign is not talked to.
func TestUntrustedCertificate(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	other := hvsim.StartHyperVForTest(t, hvsim.HyperVConfig{}, "elsewhere")
	p := env.provider(t, testInstallation, testCluster, func(c *Config) { c.CABundle = other.CAPEM })
	_, err := p.Nodes(testCtx(t))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = p.OwnedVMs(testCtx(t))
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.Is(err, hypervisor.ErrNotFound)).To(BeFalse())
	g.Expect(err.Error()).To(ContainSubstring("certificate"))
	g.Expect(env.hv.Files("hv1")).To(Equal([]string{templateDisk}), "no script and no password went to the host")
}

// TestFaultsBecomeClasses: the module's refusals keep their class across the wire.
func TestFaultsBecomeClasses(t *testing.T) {
	env := newEnv(t, hvsim.HyperVConfig{})
	ref := cloneRunner(t, env.p, "hv1", "runner-7", "c7")
	for class, want := range map[string]error{
		"Busy": hypervisor.ErrBusy, "NotFound": hypervisor.ErrNotFound, "Invalid": hypervisor.ErrInvalid,
		"Forbidden": hypervisor.ErrForbidden, "Failed": hypervisor.ErrTransient,
	} {
		t.Run(class, func(t *testing.T) {
			env.hv.FailNext("hv1", fnStartVM, class, "injected")
			_, err := env.p.Start(testCtx(t), ref)
			NewWithT(t).Expect(err).To(MatchError(want))
		})
	}
}
