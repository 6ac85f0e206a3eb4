package hyperv

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// mutations are every provider call that changes a VM.
var mutations = map[string]func(context.Context, *Provider, hypervisor.VMRef) error{
	"start": func(ctx context.Context, p *Provider, r hypervisor.VMRef) error {
		_, err := p.Start(ctx, r)
		return err
	},
	"stop": func(ctx context.Context, p *Provider, r hypervisor.VMRef) error { _, err := p.Stop(ctx, r); return err },
	"shutdown": func(ctx context.Context, p *Provider, r hypervisor.VMRef) error {
		_, err := p.Shutdown(ctx, r)
		return err
	},
	"delete": func(ctx context.Context, p *Provider, r hypervisor.VMRef) error {
		_, err := p.Delete(ctx, r)
		return err
	},
	"eject": func(ctx context.Context, p *Provider, r hypervisor.VMRef) error { return p.EjectCloudInit(ctx, r) },
	"configure": func(ctx context.Context, p *Provider, r hypervisor.VMRef) error {
		_, err := p.Configure(ctx, r, hypervisor.ConfigSpec{Cores: 1})
		return err
	},
	"checkpoint": func(ctx context.Context, p *Provider, r hypervisor.VMRef) error {
		_, err := p.CreateSnapshot(ctx, r, hypervisor.SnapshotSpec{Name: "hf-new", WithMemory: true})
		return err
	},
	"apply checkpoint": func(ctx context.Context, p *Provider, r hypervisor.VMRef) error {
		_, err := p.RollbackSnapshot(ctx, r, foreignCheckpoint, true)
		return err
	},
	"remove checkpoint": func(ctx context.Context, p *Provider, r hypervisor.VMRef) error {
		_, err := p.DeleteSnapshot(ctx, r, foreignCheckpoint)
		return err
	},
	"list checkpoints": func(ctx context.Context, p *Provider, r hypervisor.VMRef) error {
		_, err := p.Snapshots(ctx, r)
		return err
	},
	"move": func(ctx context.Context, p *Provider, r hypervisor.VMRef) error {
		_, err := p.Migrate(ctx, r, hypervisor.MigrateSpec{Target: "hv2", Online: true, WithLocalDisks: true})
		return err
	},
	"check moves": func(ctx context.Context, p *Provider, r hypervisor.VMRef) error {
		_, err := p.CheckMigration(ctx, r)
		return err
	},
	"stop a move": func(ctx context.Context, p *Provider, r hypervisor.VMRef) error {
		return p.CancelTask(ctx, r.Node, moveTask{vm: r.ID, target: "hv2", job: "0D5A1C9E-0000-4000-8000-000000000001"}.id())
	},
}

// foreignCheckpoint is the checkpoint every foreign VM carries, named as HyperFleet names its own.
const foreignCheckpoint = "hf-0123456789abcdef"

// TestForeignVMsAreNeverChanged plays someone whose VMs share the hosts: a VM without Notes,
// another installation's runner, another HypervisorCluster's runner of this installation, a
// template carrying a copied ownership block, and Notes whose last block names someone else
// after a block naming us. Every mutating call is refused with ErrNotOwned and the VM stays as
// it was, running or off.
func TestForeignVMsAreNeverChanged(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	other := env.provider(t, otherInstall, testCluster)
	sibling := env.provider(t, testInstallation, "fleet/hv-b")
	ours := env.p.notes(hypervisor.Ownership{ClaimNamespace: "team-a", ClaimName: "x", ClaimID: "x"}, "")

	foreign := map[string]string{
		"no notes":             "",
		"another installation": other.notes(hypervisor.Ownership{ClaimNamespace: "team-a", ClaimName: "x", ClaimID: "x"}, ""),
		"another cluster":      sibling.notes(hypervisor.Ownership{ClaimNamespace: "team-a", ClaimName: "x", ClaimID: "x"}, ""),
		"template":             "```hyperfleet-template\nname: t\n```\n" + ours,
		"last block is theirs": ours + "\n\n" + other.notes(hypervisor.Ownership{ClaimNamespace: "team-a", ClaimName: "x"}, "theirs"),
	}
	for name, notes := range foreign {
		for _, running := range []bool{false, true} {
			id, err := env.hv.AddVM("hv1", "vm-"+strings.ReplaceAll(name, " ", "-"), notes, running)
			if err != nil {
				t.Fatal(err)
			}
			if err := env.hv.AddCheckpoint("hv1", id, foreignCheckpoint); err != nil {
				t.Fatal(err)
			}
			ref := hypervisor.VMRef{Node: "hv1", ID: id}
			for op, call := range mutations {
				t.Run(name+"/"+op, func(t *testing.T) {
					g := NewWithT(t)
					before, checkpoints := simVM(env, "hv1", id), env.hv.Checkpoints("hv1", id)
					g.Expect(call(ctx, env.p, ref)).To(MatchError(hypervisor.ErrNotOwned))
					g.Expect(simVM(env, "hv1", id)).To(Equal(before))
					g.Expect(env.hv.Checkpoints("hv1", id)).To(Equal(checkpoints))
					g.Expect(env.hv.Merging("hv1", id)).To(BeFalse())
				})
			}
			vm, err := env.p.VM(ctx, ref)
			if err != nil {
				t.Fatal(err)
			}
			if vm.Owned() {
				t.Errorf("%s: VM read as ours", name)
			}
		}
	}
	owned, err := env.p.OwnedVMs(ctx)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(owned).To(BeEmpty())
}

// TestSeenVMIsCheckedOnTheHost: StopSeen and DeleteSeen trust the caller's read, but the module
// checks the Notes on the host again: a forged VM value (or one whose Notes changed since the
// read) cannot make HyperFleet stop or delete a VM that is not its claim's.
func TestSeenVMIsCheckedOnTheHost(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	id, err := env.hv.AddVM("hv1", "payroll", "", true)
	g.Expect(err).NotTo(HaveOccurred())
	forged := hypervisor.VM{Ref: hypervisor.VMRef{Node: "hv1", ID: id}, Name: "payroll", State: hypervisor.PowerStateStopped,
		Owner: &hypervisor.Ownership{Cluster: testCluster, ClaimNamespace: "team-a", ClaimName: "payroll", ClaimID: "c"}}
	_, err = env.p.StopSeen(ctx, forged)
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned))
	_, err = env.p.DeleteSeen(ctx, forged)
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned))
	g.Expect(simVM(env, "hv1", id).State).To(Equal(2), "still running")

	// Our own runner, read for claim c1, since handed to another claim: the claim ID is checked too.
	ref := cloneRunner(t, env.p, "hv1", "runner-3", "c1")
	vm, err := env.p.VM(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.hv.SetNotes("hv1", ref.ID, env.p.notes(hypervisor.Ownership{ClaimNamespace: "team-a", ClaimName: "runner-3", ClaimID: "c2"}, ""))).To(Succeed())
	_, err = env.p.DeleteSeen(ctx, vm)
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned))
	g.Expect(env.hv.VMs("hv1")).To(ContainElement(HaveField("ID", ref.ID)))

	// A read that shows no owner is refused before anything is sent.
	_, err = env.p.StopSeen(ctx, hypervisor.VM{Ref: ref})
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned))
}

// TestClonesOfOneName: a VM is found again by its name only with its claim's Notes. A foreign VM of
// the same name, or another namespace's claim of the same name, gets a VM and a disk of its own.
func TestClonesOfOneName(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	foreign, err := env.hv.AddVM("hv1", "runner-4", "", false)
	g.Expect(err).NotTo(HaveOccurred())
	clone := func(ns, claimID string) hypervisor.VMRef {
		ref, _, err := env.p.Clone(testCtx(t), hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "hv1", ID: templateDisk},
			Target: hypervisor.VMRef{Node: "hv1"}, Name: "runner-4", Owner: hypervisor.Ownership{Cluster: testCluster, ClaimNamespace: ns, ClaimName: "runner-4", ClaimID: claimID}})
		g.Expect(err).NotTo(HaveOccurred())
		return ref
	}
	a, b := clone("team-a", "c4a"), clone("team-b", "c4b")
	g.Expect(a.ID).NotTo(Equal(foreign))
	g.Expect(b.ID).NotTo(Equal(a.ID))
	g.Expect(clone("team-a", "c4a")).To(Equal(a), "a retry finds its own VM")
	vms := env.hv.VMs("hv1")
	g.Expect(vms).To(HaveLen(3))
	g.Expect(simVM(env, "hv1", a.ID).Disks).NotTo(Equal(simVM(env, "hv1", b.ID).Disks))
	g.Expect(simVM(env, "hv1", foreign).Notes).To(BeEmpty(), "the foreign VM is untouched")
}

func simVM(env *testEnv, host, id string) hvsim.HyperVVM {
	for _, vm := range env.hv.VMs(host) {
		if vm.ID == id {
			return vm
		}
	}
	return hvsim.HyperVVM{}
}
