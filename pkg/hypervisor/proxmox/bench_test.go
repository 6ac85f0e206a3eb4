package proxmox

import (
	"errors"
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

// BenchmarkVMLifecycle runs the full lifecycle per iteration — NextID, clone, configure (hardware,
// disk, cloud-init), start, addresses, stop, delete — waiting the way the MachineClaim controller
// does, and reports the Proxmox API calls one VM costs, counted by the simulator. The start task is
// not polled: the guest agent's addresses prove the start (the controller reads the task only while
// they are missing). Stop and destroy are confirmed by reading the VM, which the controller does
// anyway, and that read is the ownership proof StopSeen and DeleteSeen act on (the deletion reads
// the VM once before it stops or destroys it, as the controller does). "stop" stops the VM through the API; "guest-poweroff" is the production path, where the
// runner powers the guest off after its job and the controller notices it in its shared OwnedVMs
// sweep. Both grow the template's 32 GiB disk to 40 GiB; "template-disk" keeps the template's
// disk, so the controller asks for no resize.
func BenchmarkVMLifecycle(b *testing.B) {
	b.Run("stop", func(b *testing.B) { benchmarkLifecycle(b, false, true) })
	b.Run("guest-poweroff", func(b *testing.B) { benchmarkLifecycle(b, true, true) })
	b.Run("guest-poweroff/template-disk", func(b *testing.B) { benchmarkLifecycle(b, true, false) })
}

func benchmarkLifecycle(b *testing.B, guestPowerOff, resize bool) {
	sim := startSim(b, pvesim.Config{TaskDuration: time.Millisecond, BootDelay: time.Millisecond})
	p := newTestProvider(b, sim, clusterA)
	ctx := testCtx(b)
	tmpl, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: "ubuntu-2404-runner"})
	if err != nil {
		b.Fatal(err)
	}
	// The controller waits before each poll; a task of 1ms is then done on the first poll.
	const pause = 3 * time.Millisecond
	wait := func(id hypervisor.TaskID) {
		for {
			time.Sleep(pause)
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
	// waitVM reads the VM until it is in the state asked for, as the controller's deletion does.
	waitVM := func(ref hypervisor.VMRef, done func(hypervisor.VM, error) bool) {
		for {
			time.Sleep(pause)
			if done(p.VM(ctx, ref)) {
				return
			}
		}
	}
	sim.ResetRequests()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := must2(b)(p.NextID(ctx, 0))
		ref := hypervisor.VMRef{Node: tmpl.Ref.Node, ID: idOf(id)}
		_, task, err := p.Clone(ctx, hypervisor.CloneSpec{Source: tmpl.Ref, Target: ref, Name: fmt.Sprintf("bench-%d", i),
			Owner: ownerFor(clusterA, fmt.Sprintf("bench-%d", i))})
		wait(must(task, err))
		spec := hypervisor.ConfigSpec{Cores: 2, MemoryMiB: 2048,
			Network:   &hypervisor.NetworkSpec{Name: "vmbr0", VLAN: 42},
			CloudInit: &hypervisor.CloudInitData{UserData: "#cloud-config\n", MetaData: "instance-id: bench\n"}}
		if resize {
			spec.Disk = &hypervisor.DiskSpec{Name: tmpl.BootDisk, SizeGiB: 40}
		}
		wait(must(p.Configure(ctx, ref, spec)))
		start := must(p.Start(ctx, ref))
		for {
			time.Sleep(pause)
			addrs, err := p.Addresses(ctx, ref)
			if err != nil {
				b.Fatal(err)
			}
			if len(addrs) > 0 {
				break
			}
			wait(start) // only while the guest is silent, to catch a failed start
		}
		// The deletion reconcile reads the VM and acts on what that read showed.
		var seen hypervisor.VM
		if guestPowerOff {
			if err := sim.PowerOff(vmidOf(ref.ID)); err != nil {
				b.Fatal(err)
			}
			waitVM(ref, func(vm hypervisor.VM, err error) bool {
				if err != nil {
					b.Fatal(err)
				}
				seen = vm
				return true
			})
		} else {
			waitVM(ref, func(vm hypervisor.VM, err error) bool {
				if err != nil {
					b.Fatal(err)
				}
				seen = vm
				return true
			})
			must(p.StopSeen(ctx, seen))
			waitVM(ref, func(vm hypervisor.VM, err error) bool {
				if err != nil {
					b.Fatal(err)
				}
				seen = vm
				return vm.State == hypervisor.PowerStateStopped
			})
		}
		must(p.DeleteSeen(ctx, seen))
		waitVM(ref, func(_ hypervisor.VM, err error) bool {
			if err != nil && !errors.Is(err, hypervisor.ErrNotFound) {
				b.Fatal(err)
			}
			return err != nil
		})
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
