package vsphere_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/vspheresim"
)

// TestVMotionAgainstVCSim: a running VM is live-migratable to the cluster's other hosts; an
// offline move of a running VM and a move to its own host are refused; a live move lands it on the
// target; another installation cannot move it.
func TestVMotionAgainstVCSim(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	p := newProvider(t, sim, "inst0000a")
	ref := runningVM(t, p, "db-0")

	m, err := p.CheckMigration(ctx, ref)
	if err != nil || !m.LiveMigratable() || len(m.AllowedHosts) != 2 {
		t.Fatalf("CheckMigration: %+v %v", m, err)
	}
	target := m.AllowedHosts[0]
	if _, err := p.Migrate(ctx, ref, hypervisor.MigrateSpec{Target: target}); !errors.Is(err, hypervisor.ErrInvalid) {
		t.Errorf("an offline move of a running VM: %v", err)
	}
	if _, err := p.Migrate(ctx, ref, hypervisor.MigrateSpec{Target: ref.Node, Online: true}); !errors.Is(err, hypervisor.ErrInvalid) {
		t.Errorf("a move to its own host: %v", err)
	}
	theirs := newProvider(t, sim, "inst0000b")
	if _, err := theirs.Migrate(ctx, ref, hypervisor.MigrateSpec{Target: target, Online: true}); !errors.Is(err, hypervisor.ErrNotOwned) {
		t.Errorf("another installation moves our VM: %v", err)
	}
	task, err := p.Migrate(ctx, ref, hypervisor.MigrateSpec{Target: target, Online: true})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	vm, err := p.VM(ctx, ref)
	if err != nil || vm.Ref.Node != target || vm.State != hypervisor.PowerStateRunning {
		t.Fatalf("after the move: %+v %v", vm, err)
	}
	if got := simVM(t, sim, ref.ID); got.Host != target {
		t.Errorf("the simulator holds the VM on %s", got.Host)
	}
}
