package proxmox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// mutations are every mutating Provider call, for the ownership refusal tests.
var mutations = []struct {
	name string
	call func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error
}{
	{"Configure", func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
		_, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 8, Tags: []string{"pwned"}})
		return err
	}},
	{"Configure disk", func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
		_, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{Disk: &hypervisor.DiskSpec{Name: "scsi0", SizeGiB: 500}})
		return err
	}},
	{"Configure cloud-init", func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
		_, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{CloudInit: &hypervisor.CloudInitData{UserData: "#cloud-config\n"}})
		return err
	}},
	{"Start", func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
		_, err := p.Start(ctx, ref)
		return err
	}},
	{"Stop", func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
		_, err := p.Stop(ctx, ref)
		return err
	}},
	{"Shutdown", func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
		_, err := p.Shutdown(ctx, ref)
		return err
	}},
	{"Delete", func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
		_, err := p.Delete(ctx, ref)
		return err
	}},
	// The controller's deletion: one read, then the call that takes it as proof.
	{"StopSeen", func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
		vm, err := p.VM(ctx, ref)
		if err != nil {
			return err
		}
		_, err = p.StopSeen(ctx, vm)
		return err
	}},
	{"DeleteSeen", func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
		vm, err := p.VM(ctx, ref)
		if err != nil {
			return err
		}
		_, err = p.DeleteSeen(ctx, vm)
		return err
	}},
}

// TestForeignVMsAreNeverChanged runs every mutating call against VMs this cluster does not own:
// untagged and tagged foreign VMs (running and stopped), a template, and a VM of another
// HyperFleet cluster. Each must fail with ErrNotOwned and leave the VM exactly as it was.
func TestForeignVMsAreNeverChanged(t *testing.T) {
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	other := newTestProvider(t, sim, clusterB)
	otherVM := cloneOwned(t, other, 500, ownerFor(clusterB, "theirs"))
	// A second installation whose HypervisorCluster has exactly our namespace/name.
	twin := newTestProvider(t, sim, clusterA, func(c *Config) { c.InstallationID = "fedcba9876543210" })
	twinVM := cloneOwned(t, twin, 501, ownerFor(clusterA, "twin"))

	targets := map[string]hypervisor.VMRef{
		"untagged running":               {Node: "pve1", ID: idOf(foreignRunning)},
		"tagged stopped":                 {Node: "pve3", ID: idOf(foreignStopped)},
		"template":                       {Node: "pve1", ID: idOf(templateID)},
		"other cluster":                  otherVM,
		"other installation, same names": twinVM,
	}
	for targetName, ref := range targets {
		for _, m := range mutations {
			t.Run(fmt.Sprintf("%s/%s", m.name, targetName), func(t *testing.T) {
				g := NewWithT(t)
				before := simVM(t, sim, vmidOf(ref.ID))
				sim.ResetRequests()
				err := m.call(testCtx(t), p, ref)
				g.Expect(err).To(MatchError(hypervisor.ErrNotOwned))
				g.Expect(hypervisor.Reason(err)).To(Equal("NotOwned"))
				g.Expect(simVM(t, sim, vmidOf(ref.ID))).To(Equal(before))
				for key := range sim.Requests() {
					g.Expect(key).To(HavePrefix("GET "), "only reads reach a foreign VM")
				}
			})
		}
	}
}

// TestOwnedVMsIsOneCall lists this cluster's VMs with one API call, excluding foreign VMs, templates
// and another cluster's VMs.
func TestOwnedVMsIsOneCall(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	other := newTestProvider(t, sim, clusterB)
	mine1 := cloneOwned(t, p, 600, ownerFor(clusterA, "one"))
	mine2 := cloneOwned(t, p, 601, ownerFor(clusterA, "two.with.dots"))
	cloneOwned(t, other, 602, ownerFor(clusterB, "theirs"))
	twin := newTestProvider(t, sim, clusterA, func(c *Config) { c.InstallationID = "fedcba9876543210" })
	cloneOwned(t, twin, 603, ownerFor(clusterA, "one"))

	fresh := newTestProvider(t, sim, clusterA) // nothing cached
	sim.ResetRequests()
	vms, err := fresh.OwnedVMs(testCtx(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.Requests()).To(Equal(map[string]int{"GET /cluster/resources": 1}))

	byRef := map[hypervisor.VMRef]hypervisor.VM{}
	for _, vm := range vms {
		byRef[vm.Ref] = vm
	}
	g.Expect(byRef).To(HaveLen(2))
	g.Expect(byRef[mine1].Owner).To(Equal(&hypervisor.Ownership{Cluster: clusterA, ClaimNamespace: "runners", ClaimName: "one", ClaimID: "id-one"}))
	g.Expect(byRef[mine2].Owner.ClaimName).To(Equal("two.with.dots"))
	g.Expect(byRef[mine2].State).To(Equal(hypervisor.PowerStateStopped))
	g.Expect(byRef[mine2].MemoryMiB).To(Equal(2048))
}

// TestOwnershipIsReadBeforeEveryChange shows the cost model: every mutating call proves ownership
// with one read of the VM, whatever the provider saw before; a config change reads the config
// (tags, description and digest) and sends its digest back with the write.
func TestOwnershipIsReadBeforeEveryChange(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ref := cloneOwned(t, p, 700, ownerFor(clusterA, "read"))
	ctx := testCtx(t)

	sim.ResetRequests()
	_, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 3})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 4})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.Requests()).To(Equal(map[string]int{
		"GET /nodes/{node}/qemu/{vmid}/config": 2,
		"PUT /nodes/{node}/qemu/{vmid}/config": 2,
	}))
}

// TestReusedVMIDIsReverified: our VM is deleted behind our back (in the PVE UI; we never see it
// gone) and another installation's VM takes its VMID at once. Although this provider just
// listed, configured and stopped the VM with that VMID, it must not take the newcomer for ours.
func TestReusedVMIDIsReverified(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	ref := cloneOwned(t, p, 810, ownerFor(clusterA, "mine"))
	vms, err := p.OwnedVMs(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vms).To(ContainElement(HaveField("Ref", ref)))
	_, err = p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 2})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(sim.RemoveVM(vmidOf(ref.ID))).To(Succeed())
	twin := newTestProvider(t, sim, clusterA, func(c *Config) { c.InstallationID = "fedcba9876543210" })
	cloneOwned(t, twin, vmidOf(ref.ID), ownerFor(clusterA, "mine"))
	task, err := twin.Start(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, twin, task)).To(Succeed())
	before := simVM(t, sim, vmidOf(ref.ID))

	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(m.call(ctx, p, ref)).To(MatchError(hypervisor.ErrNotOwned))
			g.Expect(simVM(t, sim, vmidOf(ref.ID))).To(Equal(before))
		})
	}
}

// TestVMIDReuseIsNotTrustedAfterDelete: once our VM is gone, a foreign VM that takes its VMID is
// refused.
func TestVMIDReuseIsNotTrustedAfterDelete(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	ref := cloneOwned(t, p, 800, ownerFor(clusterA, "gone"))
	g.Expect(sim.RemoveVM(vmidOf(ref.ID))).To(Succeed()) // deleted by hand in the PVE UI
	_, err := p.VM(ctx, ref)
	g.Expect(err).To(MatchError(hypervisor.ErrNotFound))

	// Someone else clones a VM with the same VMID.
	stranger := newTestProvider(t, sim, clusterB)
	cloneOwned(t, stranger, vmidOf(ref.ID), ownerFor(clusterB, "stranger"))
	_, err = p.Stop(ctx, ref)
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned))
}

// markLegacy rewrites a VM's marks the way releases before installation identities wrote them.
func markLegacy(t *testing.T, p *Provider, ref hypervisor.VMRef, claim, uid string) {
	t.Helper()
	desc := "HyperFleet runner VM.\n\n```hyperfleet\nmanaged-by: hyperfleet\ncluster: " + p.cfg.Cluster + "\ncluster-tag: " +
		p.legacyTag + "\nclaim: runners/" + claim + "\nclaim-uid: " + uid + "\n```"
	tags := joinTags([]string{TagManaged, p.legacyTag, "hf-claim-runners." + claim, "hf-uid-" + uid, "ci"})
	NewWithT(t).Expect(p.put(testCtx(t), "mark legacy", vmPath(ref, "/config"), map[string]any{"tags": tags, "description": desc}, nil)).To(Succeed())
}

// TestLegacyVMIsAdoptedOnlyByItsClaim: a VM marked before installation identities is listed as
// Legacy, refused to every mutating call, and re-marked only for the claim whose UID it carries.
func TestLegacyVMIsAdoptedOnlyByItsClaim(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)
	ref := cloneOwned(t, p, 650, ownerFor(clusterA, "old"))
	markLegacy(t, p, ref, "old", "uid-old")

	vms, err := p.OwnedVMs(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vms).To(HaveLen(1))
	g.Expect(vms[0].Owner.Legacy).To(BeTrue())
	g.Expect(vms[0].Owner.LegacyClaimUID).To(Equal("uid-old"))
	_, err = p.Stop(ctx, ref)
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned), "a legacy VM is not changed before it is adopted")

	owner := hypervisor.Ownership{ClaimNamespace: "runners", ClaimName: "old", ClaimID: "0011223344556677"}
	before := simVM(t, sim, vmidOf(ref.ID))
	g.Expect(p.Adopt(ctx, ref, owner, "uid-someone-else")).To(MatchError(hypervisor.ErrNotOwned))
	other := owner
	other.ClaimName = "another"
	g.Expect(p.Adopt(ctx, ref, other, "uid-old")).To(MatchError(hypervisor.ErrNotOwned))
	g.Expect(simVM(t, sim, vmidOf(ref.ID))).To(Equal(before))

	g.Expect(p.Adopt(ctx, ref, owner, "uid-old")).To(Succeed())
	g.Expect(p.Adopt(ctx, ref, owner, "uid-old")).To(Succeed(), "adopting again is a no-op")
	vm := simVM(t, sim, vmidOf(ref.ID))
	g.Expect(vm.Tags).To(ConsistOf(TagManaged, p.ownerTag, "hf-claim-runners.old", "hf-id-0011223344556677", "ci"))
	g.Expect(vm.Description).To(ContainSubstring("installation: " + testInstallation))
	got, err := newTestProvider(t, sim, clusterA).VM(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Owner).To(Equal(&hypervisor.Ownership{Cluster: clusterA, ClaimNamespace: "runners", ClaimName: "old", ClaimID: "0011223344556677"}))
	_, err = p.Stop(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestVMReplacedDuringConfigureIsNotWritten: Configure proves ownership with one config read and
// then uploads the cloud-init ISO. While the upload runs, our VM is deleted behind our back and
// another installation's VM takes its VMID. The config write must not land on the newcomer: it
// carries the digest of the config that was read, which the newcomer's config does not have.
func TestVMReplacedDuringConfigureIsNotWritten(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	ctx := testCtx(t)
	twin := newTestProvider(t, sim, clusterA, func(c *Config) { c.InstallationID = "fedcba9876543210" })
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(sim.CACertPEM())).To(BeTrue())
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots}
	var (
		ref      hypervisor.VMRef
		replaced *pvesim.VM
	)
	hook := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/upload") && replaced == nil {
			g.Expect(sim.RemoveVM(vmidOf(ref.ID))).To(Succeed())
			cloneOwned(t, twin, vmidOf(ref.ID), ownerFor(clusterA, "twin"))
			vm := simVM(t, sim, vmidOf(ref.ID))
			replaced = &vm
		}
		return base.RoundTrip(r)
	})
	p := newTestProvider(t, sim, clusterA, func(c *Config) { c.HTTPClient = &http.Client{Transport: hook} })
	ref = cloneOwned(t, p, 820, ownerFor(clusterA, "mine"))

	_, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 8, Tags: []string{"pwned"}, Start: true,
		CloudInit: &hypervisor.CloudInitData{UserData: "#cloud-config\n", MetaData: "instance-id: mine\n"}})
	g.Expect(err).To(HaveOccurred())
	g.Expect(replaced).NotTo(BeNil(), "the VM was replaced during the upload")
	g.Expect(simVM(t, sim, vmidOf(ref.ID))).To(Equal(*replaced), "the newcomer's config is untouched, and it is not started")
	_, err = p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 8})
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned), "a retry reads the newcomer and refuses it")
}
