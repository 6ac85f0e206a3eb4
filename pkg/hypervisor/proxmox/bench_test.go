package proxmox

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// listCalls are cluster-wide queries a controller shares between VMs (template resolution, VMID
// proposals, the owned-VM sweep), reported apart from the per-VM calls.
var listCalls = map[string]bool{
	"GET /cluster/resources": true,
	"GET /cluster/nextid":    true,
	"GET /nodes":             true,
}

// BenchmarkVMLifecycle runs the full lifecycle per iteration — NextID, clone, configure, resize,
// cloud-init, start, addresses, stop, delete — polling tasks the way a controller does, and reports
// the Proxmox API calls one VM costs, counted by the simulator. "stop" stops the VM through the API;
// "guest-poweroff" is the production path, where the runner powers the guest off after its job and
// the controller notices it in its shared OwnedVMs sweep.
func BenchmarkVMLifecycle(b *testing.B) {
	b.Run("stop", func(b *testing.B) { benchmarkLifecycle(b, false) })
	b.Run("guest-poweroff", func(b *testing.B) { benchmarkLifecycle(b, true) })
}

func benchmarkLifecycle(b *testing.B, guestPowerOff bool) {
	sim := startSim(b, pvesim.Config{TaskDuration: time.Millisecond, BootDelay: time.Millisecond})
	p := newTestProvider(b, sim, clusterA)
	ctx := testCtx(b)
	tmpl, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: "ubuntu-2404-runner"})
	if err != nil {
		b.Fatal(err)
	}
	// The controller waits before each poll; a task of 1ms is then done on the first poll.
	wait := func(id hypervisor.TaskID) {
		for {
			time.Sleep(3 * time.Millisecond)
			st, err := p.TaskStatus(ctx, "", id)
			if err != nil {
				b.Fatal(err)
			}
			if st.Done {
				if st.Err != nil {
					b.Fatal(st.Err)
				}
				return
			}
		}
	}
	must := func(id hypervisor.TaskID, err error) hypervisor.TaskID {
		if err != nil {
			b.Fatal(err)
		}
		return id
	}
	sim.ResetRequests()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := must2(b)(p.NextID(ctx, 0))
		ref := hypervisor.VMRef{Node: tmpl.Ref.Node, ID: id}
		wait(must(p.Clone(ctx, hypervisor.CloneSpec{Source: tmpl.Ref, Target: ref, Name: fmt.Sprintf("bench-%d", i),
			Owner: ownerFor(clusterA, fmt.Sprintf("bench-%d", i))})))
		wait(must(p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 2, MemoryMiB: 2048,
			Network: &hypervisor.NetworkSpec{Bridge: "vmbr0", VLAN: 42}})))
		if err := p.ResizeDisk(ctx, ref, tmpl.BootDisk, 40); err != nil {
			b.Fatal(err)
		}
		if err := p.AttachCloudInit(ctx, ref, hypervisor.CloudInitData{UserData: "#cloud-config\n", MetaData: "instance-id: bench\n"}); err != nil {
			b.Fatal(err)
		}
		wait(must(p.Start(ctx, ref)))
		for {
			time.Sleep(3 * time.Millisecond)
			addrs, err := p.Addresses(ctx, ref)
			if err != nil {
				b.Fatal(err)
			}
			if len(addrs) > 0 {
				break
			}
		}
		if guestPowerOff {
			if err := sim.PowerOff(ref.ID); err != nil {
				b.Fatal(err)
			}
		} else {
			wait(must(p.Stop(ctx, ref)))
		}
		wait(must(p.Delete(ctx, ref)))
	}
	b.StopTimer()
	total, perVM := 0, 0
	var breakdown []string
	for key, n := range sim.Requests() {
		total += n
		if !listCalls[key] {
			perVM += n
		}
		breakdown = append(breakdown, fmt.Sprintf("%s=%.1f", key, float64(n)/float64(b.N)))
	}
	sort.Strings(breakdown)
	b.ReportMetric(float64(perVM)/float64(b.N), "apicalls/vm")
	b.ReportMetric(float64(total)/float64(b.N), "apicalls-with-list/vm")
	b.Logf("API calls per VM:\n  %s", strings.Join(breakdown, "\n  "))
}

func must2(b *testing.B) func(int, error) int {
	return func(v int, err error) int {
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
}
