package recorder_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// BenchmarkJobRecordOnSQLite is what one job costs the manager's recorder on the embedded store:
// the seven pieces of its life (three ledger events, four VM moments) and the audit entries of its
// VM, written and the record sealed with Ed25519. Run with: go test -run - -bench . ./pkg/history/recorder/
func BenchmarkJobRecordOnSQLite(b *testing.B) {
	store, err := history.OpenSQLite(b.TempDir() + "/history.db")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	r := start(b, store, recorderOptions(b))
	p := pool("github")
	ctx := context.Background()
	at := time.Now()
	audit := func(name, action string) history.AuditEntry {
		return history.AuditEntry{Actor: history.Actor{Subject: "hyperfleet-manager", Kind: history.ActorController}, Action: action,
			Object: history.ObjectRef{Kind: "MachineClaim", Namespace: "team-a", Name: name}, Result: history.ResultOK}
	}
	b.ResetTimer()
	for i := range b.N {
		id, runner := fmt.Sprint(i), fmt.Sprintf("linux-%d", i)
		r.Runner("team-a", runner, history.JobRecord{VM: history.VMRef{Provider: "proxmox", HypervisorCluster: "pve", Host: "node1", VMID: id, Name: runner},
			Template: history.TemplateRef{Name: "ubuntu", ID: "9000"}, Times: history.JobTimes{VMRequested: &at, Cloned: &at}})
		r.Audit(audit(runner, "create-vm"))
		r.Runner("team-a", runner, history.JobRecord{Identity: history.Identity{SPIFFEID: "spiffe://x/" + runner}, Times: history.JobTimes{Booted: &at, Attested: &at}})
		r.ObserveJob(ctx, p, platform.JobEvent{JobID: id, State: platform.JobQueued, CreatedAt: at}, at)
		r.ObserveJob(ctx, p, platform.JobEvent{JobID: id, State: platform.JobInProgress, RunnerName: runner}, at)
		r.ObserveJob(ctx, p, platform.JobEvent{JobID: id, State: platform.JobCompleted, RunnerName: runner, Conclusion: "success"}, at)
		r.Runner("team-a", runner, history.JobRecord{Times: history.JobTimes{VMDestroyed: &at}})
		r.Audit(audit(runner, "destroy-vm"))
	}
	// The writer's time counts: a job costs what it takes to write it, not to queue it.
	for r.Health().Pending > 0 {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	if h := r.Health(); h.Sealed != uint64(b.N) {
		b.Fatalf("%d records sealed of %d", h.Sealed, b.N)
	}
}
