package hyperv

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

const vhdDir = `C:\ProgramData\HyperFleet\Disks`

// migrationEnv is two hosts with live migration on and a running VM of ours on hv1.
func migrationEnv(t *testing.T, cfg hvsim.HyperVConfig) (*testEnv, hypervisor.VMRef) {
	t.Helper()
	env := newEnv(t, cfg)
	for _, h := range env.hosts {
		if err := env.hv.EnableMigration(h, true); err != nil {
			t.Fatal(err)
		}
	}
	ref := cloneRunner(t, env.p, "hv1", "db-m", "cm")
	if _, err := env.p.Start(testCtx(t), ref); err != nil {
		t.Fatal(err)
	}
	return env, ref
}

// TestMoveLive moves a running VM with its local differencing disk to the other host
// (shared-nothing live migration): the move is a task followed on the source's migration job, the
// VM is locked and refuses changes meanwhile, and it ends on the destination with the same GUID,
// still running, its disk in the destination's disk folder on the template's disk there.
func TestMoveLive(t *testing.T) {
	for _, quirks := range []bool{false, true} {
		t.Run(map[bool]string{false: "forced-shapes", true: "ps51-quirks"}[quirks], func(t *testing.T) {
			g := NewWithT(t)
			ctx := testCtx(t)
			env, ref := migrationEnv(t, hvsim.HyperVConfig{PS51Quirks: quirks, MoveDuration: 600 * time.Millisecond})
			p := env.p
			disk := simVM(env, "hv1", ref.ID).Disks[0]

			m, err := p.CheckMigration(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(m).To(Equal(hypervisor.Migratability{Running: true, LocalDisks: []string{disk}, AllowedHosts: []string{"hv2"}}))
			g.Expect(m.LiveMigratable()).To(BeFalse(), "its disk must be copied: withLocalDisks")

			_, err = p.Migrate(ctx, ref, hypervisor.MigrateSpec{Target: "hv2", Online: true})
			g.Expect(err).To(MatchError(hypervisor.ErrInvalid))
			g.Expect(err.Error()).To(ContainSubstring("move the virtual machine with its storage"))

			task, err := p.Migrate(ctx, ref, hypervisor.MigrateSpec{Target: "hv2", Online: true, WithLocalDisks: true})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(task)).To(MatchRegexp(`^move:` + ref.ID + `:hv2:[0-9A-F-]{36}$`))
			st, err := p.TaskStatus(ctx, "hv1", task)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st.Done).To(BeFalse())
			g.Expect(st.Progress).NotTo(BeNil(), "the migration job's PercentComplete")
			g.Expect(*st.Progress).To(BeNumerically("<", 100))
			vm, err := p.VM(ctx, ref)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(vm.Lock).To(Equal("migrate"))
			_, err = p.Stop(ctx, ref)
			g.Expect(err).To(MatchError(hypervisor.ErrBusy), "no power change mid-move")
			_, err = p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "hf-x"})
			g.Expect(err).To(MatchError(hypervisor.ErrBusy))

			g.Eventually(func(g Gomega) {
				st, err := p.TaskStatus(ctx, "hv1", task)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(st).To(Equal(hypervisor.TaskState{Done: true}))
			}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
			g.Expect(env.hv.VMs("hv1")).To(BeEmpty())
			moved := simVM(env, "hv2", ref.ID)
			g.Expect(moved.State).To(Equal(2), "still running")
			g.Expect(moved.Disks).To(Equal([]string{vhdDir + disk[len(vhdDir):]}))
			f, ok := env.hv.File("hv2", moved.Disks[0])
			g.Expect(ok).To(BeTrue())
			g.Expect(f.Parent).To(Equal(templateDisk))
			_, ok = env.hv.File("hv1", disk)
			g.Expect(ok).To(BeFalse(), "the source copy is gone")

			there, err := p.VM(ctx, hypervisor.VMRef{Node: "hv2", ID: ref.ID})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(there.Owned()).To(BeTrue())
			g.Expect(there.Lock).To(BeEmpty())
			_, err = p.VM(ctx, ref)
			g.Expect(err).To(MatchError(hypervisor.ErrNotFound))

			// Hyper-V drops an ended job after five minutes: the task is then judged by where the VM is.
			g.Expect(env.hv.ForgetMoves("hv1")).To(Succeed())
			st, err = p.TaskStatus(ctx, "hv1", task)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(st).To(Equal(hypervisor.TaskState{Done: true}))
		})
	}
}

// TestMoveRefusals: what Compare-VM finds refuses the move before it starts, in Hyper-V's words,
// leaves the VM running where it was, and keeps the host out of CheckMigration's allowed hosts.
func TestMoveRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		arrange func(*testEnv, hypervisor.VMRef) error
		spec    hypervisor.MigrateSpec
		want    string
	}{
		"live migration off on the destination": {
			arrange: func(e *testEnv, _ hypervisor.VMRef) error { return e.hv.EnableMigration("hv2", false) },
			want:    "Virtual machine migration is not enabled on host 'HV2'",
		},
		"live migration off on the source": {
			arrange: func(e *testEnv, _ hypervisor.VMRef) error { return e.hv.EnableMigration("hv1", false) },
			want:    "Virtual machine migration is not enabled on host 'HV1'",
		},
		"another processor": {
			arrange: func(e *testEnv, _ hypervisor.VMRef) error { return e.hv.SetProcessor("hv2", "AMD EPYC 9354") },
			want:    "using processor-specific features not supported on physical computer 'HV2'",
		},
		"destination storage missing": {
			arrange: func(e *testEnv, _ hypervisor.VMRef) error { return e.hv.RemoveStorage("hv2", vhdDir) },
			want:    `The destination storage path 'C:\ProgramData\HyperFleet\Disks' could not be found on 'HV2'`,
		},
		"no template disk on the destination": {
			arrange: func(e *testEnv, _ hypervisor.VMRef) error { return e.hv.RemoveFile("hv2", templateDisk) },
			want:    "does not exist on 'HV2'",
		},
		"running VM without online": {
			spec: hypervisor.MigrateSpec{Target: "hv2", WithLocalDisks: true},
			want: "a running VM moves live only",
		},
		"its own host": {
			spec: hypervisor.MigrateSpec{Target: "hv1", Online: true, WithLocalDisks: true},
			want: "is the VM's own host",
		},
		"not a host of the cluster": {
			spec: hypervisor.MigrateSpec{Target: "hv9", Online: true, WithLocalDisks: true},
			want: "is not one of this cluster's hosts",
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := testCtx(t)
			env, ref := migrationEnv(t, hvsim.HyperVConfig{})
			if tc.arrange != nil {
				g.Expect(tc.arrange(env, ref)).To(Succeed())
			}
			spec := tc.spec
			if spec.Target == "" {
				spec = hypervisor.MigrateSpec{Target: "hv2", Online: true, WithLocalDisks: true}
			}
			_, err := env.p.Migrate(ctx, ref, spec)
			g.Expect(err).To(MatchError(hypervisor.ErrInvalid))
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
			g.Expect(simVM(env, "hv1", ref.ID).State).To(Equal(2), "still running on its host")
			g.Expect(env.hv.Moves("hv1")).To(BeEmpty(), "no migration job was started")
			if tc.arrange != nil {
				m, err := env.p.CheckMigration(ctx, ref)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(m.AllowedHosts).To(BeEmpty())
			}
		})
	}
}

// TestMoveProcessorCompatibility: with the VM's processor compatibility mode on, a running VM moves
// between hosts of different processors.
func TestMoveProcessorCompatibility(t *testing.T) {
	g := NewWithT(t)
	env, ref := migrationEnv(t, hvsim.HyperVConfig{})
	g.Expect(env.hv.SetProcessor("hv2", "AMD EPYC 9354")).To(Succeed())
	g.Expect(env.hv.SetProcessorCompatibility("hv1", ref.ID, true)).To(Succeed())
	m, err := env.p.CheckMigration(testCtx(t), ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.AllowedHosts).To(Equal([]string{"hv2"}))
}

// TestMoveCancelled: stopping the migration job before the switch-over ends the task as failed and
// leaves the VM running on its source, unlocked; stopping it again is harmless.
func TestMoveCancelled(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env, ref := migrationEnv(t, hvsim.HyperVConfig{MoveDuration: time.Minute})
	task, err := env.p.Migrate(ctx, ref, hypervisor.MigrateSpec{Target: "hv2", Online: true, WithLocalDisks: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.p.CancelTask(ctx, "hv1", task)).To(Succeed())
	st, err := env.p.TaskStatus(ctx, "hv1", task)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Done).To(BeTrue())
	g.Expect(st.Err).To(MatchError(hypervisor.ErrTaskFailed))
	g.Expect(st.Err.Error()).To(ContainSubstring("stays on hv1"))
	g.Expect(simVM(env, "hv1", ref.ID).State).To(Equal(2))
	g.Expect(env.hv.VMs("hv2")).To(BeEmpty())
	vm, err := env.p.VM(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.Lock).To(BeEmpty())
	g.Expect(env.p.CancelTask(ctx, "hv1", task)).To(Succeed())
}

// TestMoveFailsMidway: a migration job that fails reports Hyper-V's error through the task and
// leaves the VM on its source.
func TestMoveFailsMidway(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env, ref := migrationEnv(t, hvsim.HyperVConfig{MoveDuration: 200 * time.Millisecond})
	env.hv.FailNextMove("hv1", "The Virtual Machine Management Service failed to establish a connection for a Virtual Machine migration.")
	task, err := env.p.Migrate(ctx, ref, hypervisor.MigrateSpec{Target: "hv2", Online: true, WithLocalDisks: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		st, err := env.p.TaskStatus(ctx, "hv1", task)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Done).To(BeTrue())
		g.Expect(st.Err).To(MatchError(ContainSubstring("failed to establish a connection")))
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	g.Expect(simVM(env, "hv1", ref.ID).State).To(Equal(2))
}
