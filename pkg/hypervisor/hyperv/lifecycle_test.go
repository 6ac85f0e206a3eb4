package hyperv

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// TestLifecycle runs one runner VM through its whole life on a simulated host: a linked clone
// (differencing disk on the template's VHDX), configuration with a seed ISO, start with the guest
// reading its user-data, addresses, stop, and delete with its disk and seed. It runs with and
// without Windows PowerShell 5.1's unforced shapes, which the decoder must read alike.
func TestLifecycle(t *testing.T) {
	for _, quirks := range []bool{false, true} {
		t.Run(map[bool]string{false: "forced-shapes", true: "ps51-quirks"}[quirks], func(t *testing.T) {
			g := NewWithT(t)
			ctx := testCtx(t)
			booted := make(chan hvsim.HyperVBootVM, 1)
			env := newEnv(t, hvsim.HyperVConfig{PS51Quirks: quirks, BootHook: func(ctx context.Context, vm hvsim.HyperVBootVM) error {
				booted <- vm
				<-ctx.Done()
				return ctx.Err()
			}})
			p := env.p

			version, err := p.Verify(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(version).To(ContainSubstring("2 of 2 hosts"))

			nodes, err := p.Nodes(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(nodes).To(HaveLen(2))
			g.Expect(nodes[0]).To(Equal(hypervisor.Node{Name: "hv1", Online: true, CPUs: 16, MemoryTotal: 64 << 30, MemoryFree: 64 << 30}))

			tmpl, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: templateName, Node: "hv2"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tmpl.Ref).To(Equal(hypervisor.VMRef{Node: "hv2", ID: templateDisk}))
			g.Expect(tmpl.DiskGiB).To(Equal(20))

			owner := hypervisor.Ownership{Cluster: testCluster, ClaimNamespace: "team-a", ClaimName: "runner-1", ClaimID: "claim-1"}
			ref, task, err := p.Clone(ctx, hypervisor.CloneSpec{Source: tmpl.Ref, Target: hypervisor.VMRef{Node: "hv2"}, Name: "runner-1", Owner: owner})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(task).To(BeEmpty())
			g.Expect(ref.Node).To(Equal("hv2"))
			g.Expect(ref.ID).To(MatchRegexp(`^[0-9a-f-]{36}$`))

			// A retry of the same clone (its answer lost) finds the VM the first attempt made.
			again, _, err := p.Clone(ctx, hypervisor.CloneSpec{Source: tmpl.Ref, Target: hypervisor.VMRef{Node: "hv2"}, Name: "runner-1", Owner: owner})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(Equal(ref))

			child := `C:\ProgramData\HyperFleet\Disks\` + p.diskName("runner-1", owner)
			g.Expect(child).To(MatchRegexp(`\\runner-1-[0-9a-f]{12}\.vhdx$`))
			disk, ok := env.hv.File("hv2", child)
			g.Expect(ok).To(BeTrue())
			g.Expect(disk.Kind).To(Equal("vhdx"))
			g.Expect(disk.Parent).To(Equal(templateDisk), "a linked clone is a differencing disk on the template's")

			_, err = p.Configure(ctx, ref, hypervisor.ConfigSpec{
				Cores: 4, MemoryMiB: 8192, Network: &hypervisor.NetworkSpec{Name: runnerSwitch, VLAN: 42},
				Description: "runner for team-a", Tags: []string{"linux", "x64"}, Disk: &hypervisor.DiskSpec{SizeGiB: 40},
				CloudInit: &hypervisor.CloudInitData{UserData: "#cloud-config\nruncmd: [hyperfleet-agent]\n", MetaData: "instance-id: runner-1\n"},
			})
			g.Expect(err).NotTo(HaveOccurred())
			vms := env.hv.VMs("hv2")
			g.Expect(vms).To(HaveLen(1))
			sim := vms[0]
			seed := `C:\ProgramData\HyperFleet\Seeds\hyperfleet-` + ref.ID + "-cidata.iso"
			g.Expect(sim.CPUs).To(Equal(4))
			g.Expect(sim.MemoryMiB).To(Equal(int64(8192)))
			g.Expect(sim.Switch).To(Equal(runnerSwitch))
			g.Expect(sim.VLAN).To(Equal(42))
			g.Expect(sim.DVDs).To(Equal([]string{seed}))
			g.Expect(sim.SecureBoot).To(Equal(DefaultSecureBootTemplate))
			g.Expect(sim.Notes).To(HavePrefix("runner for team-a\n\n```hyperfleet\n"))
			g.Expect(sim.Notes).To(ContainSubstring("claim: team-a/runner-1\nclaim-id: claim-1\n"))
			disk, _ = env.hv.File("hv2", child)
			g.Expect(disk.Size).To(Equal(int64(40) << 30))

			vm, err := p.VM(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(vm.State).To(Equal(hypervisor.PowerStateStopped))
			g.Expect(vm.Owner).To(Equal(&owner))
			g.Expect(vm.Cores).To(Equal(4))
			g.Expect(vm.Tags).To(Equal([]string{"linux", "x64"}), "tags live in the Notes")

			_, err = p.Start(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			var guest hvsim.HyperVBootVM
			g.Eventually(booted).Should(Receive(&guest))
			g.Expect(string(guest.UserData)).To(ContainSubstring("hyperfleet-agent"))
			g.Expect(string(guest.MetaData)).To(Equal("instance-id: runner-1\n"))

			addrs, err := p.Addresses(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(addrs).To(Equal([]hypervisor.Address{
				{Type: hypervisor.AddressInternalIP, Address: guest.IP},
				{Type: hypervisor.AddressHostname, Address: "runner-1"},
			}), "the link-local address is left out")

			owned, err := p.OwnedVMs(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(owned).To(HaveLen(1))
			g.Expect(owned[0].Ref).To(Equal(ref))
			g.Expect(owned[0].State).To(Equal(hypervisor.PowerStateRunning))

			_, err = p.Delete(ctx, ref)
			g.Expect(err).To(MatchError(hypervisor.ErrBusy), "a running VM is not deleted")

			g.Expect(p.EjectCloudInit(ctx, ref)).To(Succeed())
			_, ok = env.hv.File("hv2", seed)
			g.Expect(ok).To(BeFalse(), "the spent seed is deleted")
			g.Expect(env.hv.VMs("hv2")[0].DVDs).To(Equal([]string{""}))
			g.Expect(env.hv.VMs("hv2")[0].State).To(Equal(2), "ejecting the seed leaves the VM running")

			_, err = p.Stop(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			vm, err = p.VM(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(vm.State).To(Equal(hypervisor.PowerStateStopped))

			_, err = p.Delete(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(env.hv.VMs("hv2")).To(BeEmpty())
			_, ok = env.hv.File("hv2", child)
			g.Expect(ok).To(BeFalse(), "the differencing disk goes with the VM")
			_, ok = env.hv.File("hv2", templateDisk)
			g.Expect(ok).To(BeTrue(), "the template's disk stays")
			_, err = p.VM(ctx, ref)
			g.Expect(err).To(MatchError(hypervisor.ErrNotFound))
		})
	}
}

// TestShutdownEndsTheGuest: a guest shutdown goes through the integration service and the VM is
// off once the guest is done.
func TestShutdownEndsTheGuest(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env := newEnv(t, hvsim.HyperVConfig{BootHook: func(ctx context.Context, _ hvsim.HyperVBootVM) error {
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // the guest takes a moment to halt
		return nil
	}})
	ref := cloneRunner(t, env.p, "hv1", "runner-2", "claim-2")
	_, err := env.p.Start(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = env.p.Shutdown(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() hypervisor.PowerState {
		vm, err := env.p.VM(ctx, ref)
		g.Expect(err).NotTo(HaveOccurred())
		return vm.State
	}).Should(Equal(hypervisor.PowerStateStopped))
}

// TestCloneRefusals: what Hyper-V cannot do is refused before it is tried.
func TestCloneRefusals(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	for _, tc := range []struct {
		name string
		spec hypervisor.CloneSpec
		want error
	}{
		{"storage for a linked clone", hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "hv1", ID: templateDisk}, Target: hypervisor.VMRef{Node: "hv1"}, Name: "a", Storage: "fast", Owner: hypervisor.Ownership{ClaimID: "c"}}, hypervisor.ErrInvalid},
		{"storage that cannot name a folder", hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "hv1", ID: templateDisk}, Target: hypervisor.VMRef{Node: "hv1"}, Name: "a", Full: true, Storage: `..\x`, Owner: hypervisor.Ownership{ClaimID: "c"}}, hypervisor.ErrInvalid},
		{"template on another host", hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "hv2", ID: templateDisk}, Target: hypervisor.VMRef{Node: "hv1"}, Name: "a", Full: true, Owner: hypervisor.Ownership{ClaimID: "c"}}, hypervisor.ErrInvalid},
		{"no claim ID", hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "hv1", ID: templateDisk}, Target: hypervisor.VMRef{Node: "hv1"}, Name: "a"}, hypervisor.ErrInvalid},
		{"name with a path", hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "hv1", ID: templateDisk}, Target: hypervisor.VMRef{Node: "hv1"}, Name: `..\evil`, Owner: hypervisor.Ownership{ClaimID: "c"}}, hypervisor.ErrInvalid},
		{"unknown host", hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "hv9", ID: templateDisk}, Target: hypervisor.VMRef{Node: "hv9"}, Name: "a", Owner: hypervisor.Ownership{ClaimID: "c"}}, hypervisor.ErrInvalid},
		{"disk outside the template folder", hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "hv1", ID: `C:\Windows\System32\evil.vhdx`}, Target: hypervisor.VMRef{Node: "hv1"}, Name: "a", Owner: hypervisor.Ownership{ClaimID: "c"}}, hypervisor.ErrInvalid},
		{"missing template", hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "hv1", ID: `C:\ProgramData\HyperFleet\Templates\nope.vhdx`}, Target: hypervisor.VMRef{Node: "hv1"}, Name: "a", Owner: hypervisor.Ownership{ClaimID: "c"}}, hypervisor.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, _, err := env.p.Clone(ctx, tc.spec)
			g.Expect(err).To(MatchError(tc.want))
			g.Expect(env.hv.VMs("hv1")).To(BeEmpty())
		})
	}
}

// cloneRunner clones the template on node as name for claimID and returns its reference.
func cloneRunner(t testing.TB, p *Provider, node, name, claimID string) hypervisor.VMRef {
	t.Helper()
	g := NewWithT(t)
	ref, _, err := p.Clone(testCtx(t), hypervisor.CloneSpec{
		Source: hypervisor.VMRef{Node: node, ID: templateDisk}, Target: hypervisor.VMRef{Node: node}, Name: name,
		Owner: hypervisor.Ownership{Cluster: p.cfg.Cluster, ClaimNamespace: "team-a", ClaimName: name, ClaimID: claimID},
	})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = p.Configure(testCtx(t), ref, hypervisor.ConfigSpec{Cores: 2, MemoryMiB: 2048, Network: &hypervisor.NetworkSpec{Name: runnerSwitch},
		CloudInit: &hypervisor.CloudInitData{UserData: "#cloud-config\n", MetaData: "instance-id: " + name + "\n"}})
	g.Expect(err).NotTo(HaveOccurred())
	return ref
}
