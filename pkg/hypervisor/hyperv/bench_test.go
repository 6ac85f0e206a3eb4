package hyperv

import (
	"fmt"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// BenchmarkVMLifecycle drives one VM through clone → configure (hardware, disk, seed) → start →
// addresses → stop → delete over the WinRM client and the WS-Man simulator, with the module
// already deployed, and counts what reaches the host: PowerShell runs (WS-Man Command), WS-Man
// requests of every kind (Create, Command, Send, Receive, Signal, Delete) and bytes.
func BenchmarkVMLifecycle(b *testing.B) {
	env := newEnv(b, hvsim.HyperVConfig{PS51Quirks: true})
	ctx := testCtx(b)
	if _, err := env.p.Verify(ctx); err != nil { // deploys the module
		b.Fatal(err)
	}
	srv := env.sim.Servers["hv1"]
	before := srv.Stats()
	b.ResetTimer()
	for i := range b.N {
		name := fmt.Sprintf("runner-%d", i)
		owner := hypervisor.Ownership{Cluster: testCluster, ClaimNamespace: "team-a", ClaimName: name, ClaimID: name}
		ref, _, err := env.p.Clone(ctx, hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "hv1", ID: templateDisk},
			Target: hypervisor.VMRef{Node: "hv1"}, Name: name, Owner: owner})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := env.p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 2, MemoryMiB: 2048,
			Network: &hypervisor.NetworkSpec{Name: runnerSwitch, VLAN: 42}, Disk: &hypervisor.DiskSpec{SizeGiB: 40},
			CloudInit: &hypervisor.CloudInitData{UserData: "#cloud-config\nruncmd: [hyperfleet-agent]\n", MetaData: "instance-id: " + name + "\n"}}); err != nil {
			b.Fatal(err)
		}
		if _, err := env.p.Start(ctx, ref); err != nil {
			b.Fatal(err)
		}
		if _, err := env.p.Addresses(ctx, ref); err != nil {
			b.Fatal(err)
		}
		vm, err := env.p.VM(ctx, ref)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := env.p.StopSeen(ctx, vm); err != nil {
			b.Fatal(err)
		}
		if _, err := env.p.Delete(ctx, ref); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	after := srv.Stats()
	n := float64(b.N)
	requests := 0
	for action, c := range after.Calls {
		requests += c - before.Calls[action]
	}
	b.ReportMetric(float64(after.Calls["Command"]-before.Calls["Command"])/n, "runs/VM")
	b.ReportMetric(float64(requests)/n, "wsman-requests/VM")
	b.ReportMetric(float64(after.BytesIn-before.BytesIn)/n, "bytes-sent/VM")
}
