package vsphere_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/vspheresim"
)

// runningVM clones the template and starts the clone.
func runningVM(t *testing.T, p hypervisor.Provider, name string) hypervisor.VMRef {
	t.Helper()
	ctx := context.Background()
	tmpl, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: "ubuntu-2404-runner"})
	if err != nil {
		t.Fatal(err)
	}
	ref, task, err := p.Clone(ctx, hypervisor.CloneSpec{Source: tmpl.Ref, Target: hypervisor.VMRef{Node: tmpl.Ref.Node}, Name: name,
		Owner: hypervisor.Ownership{ClaimNamespace: "fleet", ClaimName: name, ClaimID: "id-" + name}})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	if task, err = p.Start(ctx, ref); err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	return ref
}

// TestSnapshotsAgainstVCSim takes snapshots with and without memory, refuses a second snapshot of
// one name, rolls back and removes one, through vCenter's snapshot tasks. (vcsim v0.52.0 panics
// removing the current snapshot when it is a root, so the child is the one removed here.)
func TestSnapshotsAgainstVCSim(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	p := newProvider(t, sim, "inst0000a")
	ref := runningVM(t, p, "db-0")

	task, err := p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "before-upgrade", Description: "monday", WithMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	if _, err := p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "before-upgrade"}); !errors.Is(err, hypervisor.ErrInvalid) {
		t.Errorf("a second snapshot of one name: %v", err)
	}
	task, err = p.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "after-upgrade"})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	list, err := p.Snapshots(ctx, ref)
	if err != nil || len(list) != 2 || list[0].Name != "before-upgrade" || !list[0].WithMemory || list[0].Description != "monday" ||
		list[1].Parent != "before-upgrade" {
		t.Fatalf("snapshots: %+v %v", list, err)
	}

	task, err = p.RollbackSnapshot(ctx, ref, "before-upgrade", true)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	task, err = p.DeleteSnapshot(ctx, ref, "after-upgrade")
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	if list, err = p.Snapshots(ctx, ref); err != nil || len(list) != 1 || list[0].Name != "before-upgrade" {
		t.Fatalf("after removing the child: %+v %v", list, err)
	}
	if _, err := p.DeleteSnapshot(ctx, ref, "never-taken"); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("removing a snapshot that does not exist: %v", err)
	}

	theirs := newProvider(t, sim, "inst0000b")
	if _, err := theirs.CreateSnapshot(ctx, ref, hypervisor.SnapshotSpec{Name: "theirs"}); !errors.Is(err, hypervisor.ErrNotOwned) {
		t.Errorf("another installation snapshots our VM: %v", err)
	}
	if _, err := theirs.RollbackSnapshot(ctx, ref, "after-upgrade", false); !errors.Is(err, hypervisor.ErrNotOwned) {
		t.Errorf("another installation rolls our VM back: %v", err)
	}
}
