package vsphere_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/vspheresim"
)

// TestAdoptedDatastore: a datastore is adopted and its capacity read on each host that mounts it;
// defining one, or asking it to encrypt, is refused with the gap, and an adopted datastore is
// never deleted.
func TestAdoptedDatastore(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	p := newProvider(t, sim, "inst0000a")

	adopt := hypervisor.StoragePool{Name: sim.Datastore, Adopt: true, Type: "datastore"}
	if gaps := p.StorageGaps(adopt); len(gaps) != 0 {
		t.Errorf("gaps of an adopted datastore: %+v", gaps)
	}
	if err := p.EnsureStorage(ctx, adopt); err != nil {
		t.Fatal(err)
	}
	state, err := p.StorageState(ctx, sim.Datastore)
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := p.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(state.Nodes) != len(nodes) {
		t.Fatalf("state on %d hosts, the cluster has %d: %+v", len(state.Nodes), len(nodes), state)
	}
	for i, n := range state.Nodes {
		if n.Node != nodes[i].Name || !n.Active || n.TotalBytes <= 0 || n.AvailableBytes <= 0 || n.UsedBytes != n.TotalBytes-n.AvailableBytes {
			t.Errorf("node state %+v", n)
		}
	}

	define := hypervisor.StoragePool{Name: "fast", Type: "datastore", Encrypted: true}
	var fields []string
	for _, g := range p.StorageGaps(define) {
		fields = append(fields, g.Field)
	}
	if len(fields) != 2 || fields[0] != "spec.adopt" || fields[1] != "spec.encrypted" {
		t.Errorf("gaps of a datastore to define: %v", fields)
	}
	if err := p.EnsureStorage(ctx, define); !errors.Is(err, hypervisor.ErrUnsupported) {
		t.Errorf("defining a datastore: %v", err)
	}
	if err := p.EnsureStorage(ctx, hypervisor.StoragePool{Name: "nope", Adopt: true}); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("adopting a datastore that does not exist: %v", err)
	}
	if err := p.EnsureStorage(ctx, hypervisor.StoragePool{Name: sim.Datastore, Adopt: true, Nodes: []string{"esx-elsewhere"}}); !errors.Is(err, hypervisor.ErrInvalid) {
		t.Errorf("adopting a datastore on a host that does not mount it: %v", err)
	}
	if _, err := p.StorageState(ctx, "nope"); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("the state of a datastore that does not exist: %v", err)
	}
	if err := p.DeleteStorage(ctx, sim.Datastore, hypervisor.Ownership{}); !errors.Is(err, hypervisor.ErrNotOwned) {
		t.Errorf("deleting an adopted datastore: %v", err)
	}
	if err := p.DeleteStorage(ctx, "nope", hypervisor.Ownership{}); err != nil {
		t.Errorf("deleting a datastore that is not there: %v", err)
	}
}
