package instrumented

import (
	"context"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// snapshotting is the fake with snapshots.
type snapshotting struct{ fakeProvider }

func (s *snapshotting) Snapshots(context.Context, hypervisor.VMRef) ([]hypervisor.Snapshot, error) {
	return []hypervisor.Snapshot{{Name: "a"}}, nil
}
func (s *snapshotting) CreateSnapshot(context.Context, hypervisor.VMRef, hypervisor.SnapshotSpec) (hypervisor.TaskID, error) {
	return "", nil
}
func (s *snapshotting) DeleteSnapshot(context.Context, hypervisor.VMRef, string) (hypervisor.TaskID, error) {
	return "", nil
}
func (s *snapshotting) RollbackSnapshot(context.Context, hypervisor.VMRef, string, bool) (hypervisor.TaskID, error) {
	return "", nil
}

// TestAsTellsWhatTheWrappedProviderHas: the wrapper offers every optional interface, so a plain
// type assertion on it always says yes; hypervisor.As answers for the provider it wraps, and
// hands back the wrapper, so the calls stay instrumented.
func TestAsTellsWhatTheWrappedProviderHas(t *testing.T) {
	plain := Wrap(&fakeProvider{}, "fake", "ns/c")
	if _, lies := plain.(hypervisor.Snapshotter); !lies {
		t.Fatal("the wrapper no longer offers every optional interface; this test is moot")
	}
	if _, ok := hypervisor.As[hypervisor.Snapshotter](plain); ok {
		t.Error("As says a provider without snapshots has them")
	}
	if _, ok := hypervisor.As[hypervisor.Migrator](plain); ok {
		t.Error("As says a provider without migrations has them")
	}
	wrapped := Wrap(&snapshotting{}, "fake", "ns/c")
	s, ok := hypervisor.As[hypervisor.Snapshotter](wrapped)
	if !ok {
		t.Fatal("As misses the wrapped provider's snapshots")
	}
	if _, isWrapper := s.(*provider); !isWrapper {
		t.Errorf("As returned %T, not the instrumented wrapper", s)
	}
	if list, err := s.Snapshots(context.Background(), hypervisor.VMRef{ID: "1"}); err != nil || len(list) != 1 {
		t.Errorf("through the wrapper: %v %v", list, err)
	}
}
