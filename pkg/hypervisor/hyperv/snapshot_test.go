package hyperv

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// TestCheckpoints takes, lists, applies and removes checkpoints of a running runner VM through
// the WS-Man simulator: a standard checkpoint holds the memory and resumes the VM when applied, a
// production checkpoint does not and leaves it off, a name is taken once, and a removal is
// followed by a background merge that locks the VM until it ends.
func TestCheckpoints(t *testing.T) {
	for _, quirks := range []bool{false, true} {
		t.Run(map[bool]string{false: "forced-shapes", true: "ps51-quirks"}[quirks], func(t *testing.T) {
			g := NewWithT(t)
			ctx := testCtx(t)
			env := newEnv(t, hvsim.HyperVConfig{PS51Quirks: quirks, MergeDuration: 500 * time.Millisecond})
			p := env.p
			ref := cloneRunner(t, p, "hv1", "db-1", "c1")
			_, err := p.Start(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())

			task, err := p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "hf-a", WithMemory: true})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(task).To(BeEmpty(), "Checkpoint-VM is done when it returns")
			_, err = p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "hf-b"})
			g.Expect(err).NotTo(HaveOccurred())
			_, err = p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "hf-a"})
			g.Expect(err).To(MatchError(hypervisor.ErrAlreadyExists))
			g.Expect(err.Error()).To(ContainSubstring("checkpoint name 'hf-a' already used"))

			list, err := p.Snapshots(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list).To(HaveLen(2))
			g.Expect(list[0]).To(And(HaveField("Name", "hf-a"), HaveField("WithMemory", true), HaveField("Parent", "")))
			g.Expect(list[1]).To(And(HaveField("Name", "hf-b"), HaveField("WithMemory", false), HaveField("Parent", "hf-a")))
			g.Expect(list[0].Time).To(BeTemporally("~", time.Now(), time.Minute))
			kinds := env.hv.Checkpoints("hv1", ref.ID)
			g.Expect(kinds[0].Kind).To(Equal("Standard"))
			g.Expect(kinds[1].Kind).To(Equal("Production"))

			// A production checkpoint: the VM is off afterwards unless asked to start.
			_, err = p.RollbackSnapshot(ctx, ref, "hf-b", false)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(simVM(env, "hv1", ref.ID).State).To(Equal(3), "off")
			_, err = p.RollbackSnapshot(ctx, ref, "hf-b", true)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(simVM(env, "hv1", ref.ID).State).To(Equal(2), "started as asked")
			// A standard checkpoint with memory resumes the VM whatever start says.
			_, err = p.Stop(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			_, err = p.RollbackSnapshot(ctx, ref, "hf-a", false)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(simVM(env, "hv1", ref.ID).State).To(Equal(2), "resumed from its saved state")

			task, err = p.DeleteSnapshot(ctx, ref, "hf-a")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(task).To(Equal(hypervisor.TaskID("merge:" + ref.ID)))
			st, err := p.TaskStatus(ctx, "hv1", task)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Done).To(BeFalse(), "the merge runs on after Remove-VMSnapshot returns")
			vm, err := p.VM(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(vm.Lock).To(Equal("merge"))
			_, err = p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "hf-c"})
			g.Expect(err).To(MatchError(hypervisor.ErrBusy), "no checkpoint while a merge runs")
			g.Eventually(func(g Gomega) {
				st, err := p.TaskStatus(ctx, "hv1", task)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(st.Done).To(BeTrue())
			}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
			list, err = p.Snapshots(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list).To(ConsistOf(And(HaveField("Name", "hf-b"), HaveField("Parent", ""))), "the child moved up to the removed one's parent")

			_, err = p.DeleteSnapshot(ctx, ref, "hf-a")
			g.Expect(err).To(MatchError(hypervisor.ErrNotFound))
			_, err = p.RollbackSnapshot(ctx, ref, "hf-zz", false)
			g.Expect(err).To(MatchError(hypervisor.ErrNotFound))
		})
	}
}

// TestCheckpointNamesHyperVRepeats: Hyper-V lets an operator make a second checkpoint of the name
// HyperFleet gave its own. HyperFleet then applies and removes neither: it cannot tell which one is
// its own, and guessing could roll a database back to someone else's checkpoint.
func TestCheckpointNamesHyperVRepeats(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	ref := cloneRunner(t, env.p, "hv1", "db-2", "c2")
	_, err := env.p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "hf-nightly"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.hv.AddCheckpoint("hv1", ref.ID, "hf-nightly")).To(Succeed())
	before := env.hv.Checkpoints("hv1", ref.ID)
	g.Expect(before).To(HaveLen(2))

	_, err = env.p.RollbackSnapshot(ctx, ref, "hf-nightly", false)
	g.Expect(err).To(MatchError(hypervisor.ErrAmbiguous))
	_, err = env.p.DeleteSnapshot(ctx, ref, "hf-nightly")
	g.Expect(err).To(MatchError(hypervisor.ErrAmbiguous))
	g.Expect(err.Error()).To(ContainSubstring("2 checkpoints"))
	g.Expect(env.hv.Checkpoints("hv1", ref.ID)).To(Equal(before))
	g.Expect(env.hv.Merging("hv1", ref.ID)).To(BeFalse())
}

// TestCheckpointsDisabled: a VM whose checkpoints an operator disabled is refused, and its
// checkpoint type is not switched on behind the operator's back.
func TestCheckpointsDisabled(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	ref := cloneRunner(t, env.p, "hv1", "db-3", "c3")
	g.Expect(env.hv.SetCheckpointType("hv1", ref.ID, "Disabled")).To(Succeed())
	_, err := env.p.CreateSnapshot(testCtx(t), ref, hypervisor.SnapshotSpec{Name: "hf-a", WithMemory: true})
	g.Expect(err).To(MatchError(hypervisor.ErrInvalid))
	g.Expect(err.Error()).To(ContainSubstring("CheckpointType is Disabled"))
	g.Expect(env.hv.Checkpoints("hv1", ref.ID)).To(BeEmpty())
}

// TestCheckpointNameCannotBreakOut plays a user whose snapshot name tries to end the script's
// string and run its own command. The provider refuses such a name before anything is sent, and
// even a name that got through would travel only inside the base64 JSON argument: the script sent
// holds the one module call and no byte of the name.
func TestCheckpointNameCannotBreakOut(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	ref := cloneRunner(t, env.p, "hv1", "db-4", "c4")
	hostile := []string{
		"x'; Remove-VM -Name * -Force; '",
		"x`n Stop-VM *",
		"$(Remove-Item C:\\ -Recurse)",
		"x\"; Stop-Computer; \"",
		"hf-" + strings.Repeat("a", 40),
	}
	vmsBefore := env.hv.VMs("hv1")
	for _, name := range hostile {
		_, err := env.p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: name})
		g.Expect(err).To(MatchError(hypervisor.ErrInvalid), name)
		_, err = env.p.RollbackSnapshot(ctx, ref, name, true)
		g.Expect(err).To(MatchError(hypervisor.ErrInvalid), name)
		_, err = env.p.DeleteSnapshot(ctx, ref, name)
		g.Expect(err).To(MatchError(hypervisor.ErrInvalid), name)

		script, err := callScript(env.p.cfg.ModuleRoot, fnNewCheckpoint, checkpointInput{ID: ref.ID, Name: name})
		g.Expect(err).NotTo(HaveOccurred())
		lines := strings.Split(strings.TrimSuffix(script, "\n"), "\n")
		g.Expect(lines).To(HaveLen(3))
		g.Expect(lines[2]).To(MatchRegexp(`^New-HFCheckpoint -InputBase64 '[A-Za-z0-9+/=]+'$`))
		g.Expect(script).NotTo(ContainSubstring(name))
		raw, err := base64.StdEncoding.DecodeString(regexp.MustCompile(`'([A-Za-z0-9+/=]+)'$`).FindStringSubmatch(lines[2])[1])
		g.Expect(err).NotTo(HaveOccurred())
		var in checkpointInput
		g.Expect(json.Unmarshal(raw, &in)).To(Succeed())
		g.Expect(in.Name).To(Equal(name), "the name arrives whole, as data")
	}
	g.Expect(env.hv.Calls()["hv1/New-HFCheckpoint"]).To(BeZero())
	g.Expect(env.hv.VMs("hv1")).To(Equal(vmsBefore))
	g.Expect(env.hv.Checkpoints("hv1", ref.ID)).To(BeEmpty())
}

// TestDeleteVMWithCheckpoints: a persistent VM with checkpoints is deleted in two steps, because
// only its own differencing disk is HyperFleet's to delete: the first call removes the
// checkpoints and answers ErrBusy while Hyper-V merges them, a later one deletes the VM and its disk.
func TestDeleteVMWithCheckpoints(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env := newEnv(t, hvsim.HyperVConfig{MergeDuration: 300 * time.Millisecond})
	ref := cloneRunner(t, env.p, "hv1", "db-5", "c5")
	for _, n := range []string{"hf-a", "hf-b"} {
		_, err := env.p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: n})
		g.Expect(err).NotTo(HaveOccurred())
	}
	_, err := env.p.Delete(ctx, ref)
	g.Expect(err).To(MatchError(hypervisor.ErrBusy))
	g.Expect(env.hv.Checkpoints("hv1", ref.ID)).To(BeEmpty())
	g.Eventually(func() error { _, err := env.p.Delete(ctx, ref); return err }, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(env.hv.VMs("hv1")).To(BeEmpty())
	for _, f := range env.hv.Files("hv1") {
		g.Expect(f).NotTo(ContainSubstring(`\Disks\`))
	}
}
