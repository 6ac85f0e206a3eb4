package proxmox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestSoak is `make soak` (HYPERFLEET_SOAK_N lifecycles; a short run of 30 by default, which
// `make test` runs): VM lifecycles (clone, wait, delete, wait until gone) for one claim each,
// through the Proxmox provider against the simulator with its load model on (time scale 50) and
// 5% of every request faulted (500, 596 or hung), 5% of clone and destroy tasks failing, and the
// provider rebuilt three times mid-flight, as a restarted manager does. Each claim is reconciled
// the way the MachineClaim controller does it: its VMID is fixed before the first clone, a failed
// or unanswered call is retried after reading the VM. It asserts 0 leaked VMs, 0 claims with two
// VMs, 0 foreign VMs touched, and reports the time to settle. Provider level: the controllers,
// webhooks and the bootstrap service are not in this run.
func TestSoak(t *testing.T) {
	n := 30
	if v := os.Getenv("HYPERFLEET_SOAK_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("HYPERFLEET_SOAK_N=%q is not a positive number", v)
		}
	}
	model := pvesim.DefaultLoadModel()
	model.TimeScale = 50
	sim := pvesim.StartForTest(t, pvesim.Config{Load: model, Seed: 5})
	foreign := map[int]pvesim.VM{}
	for _, vm := range sim.VMs() {
		if !vm.Template {
			foreign[vm.VMID] = vm
		}
	}
	for _, f := range []pvesim.Fault{
		{Rate: 0.02, Status: 500, Message: "Internal Server Error"},
		{Rate: 0.02, Status: 596, Message: "Connection timed out"},
		{Rate: 0.01, Hang: true},
		{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", Rate: 0.05, TaskExitStatus: "clone failed: storage full"},
		{Endpoint: "DELETE /nodes/{node}/qemu/{vmid}", Rate: 0.05, TaskExitStatus: "can't lock file '/var/lock/qemu-server/lock-0.conf' - got timeout"},
	} {
		sim.InjectFault(f)
	}
	var mu sync.Mutex
	p := newTestProvider(t, sim, clusterA, func(c *Config) { c.Timeout = time.Second })
	provider := func() *Provider { mu.Lock(); defer mu.Unlock(); return p }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pause := model.Wall(time.Second)

	// lifecycle reconciles claim i until its VM was created and is gone again.
	lifecycle := func(i int) error {
		ref := hypervisor.VMRef{Node: []string{"pve1", "pve2"}[i%2], ID: idOf(30000 + i)}
		src := hypervisor.VMRef{Node: ref.Node, ID: idOf(9000 + i%2)}
		owner := ownerFor(clusterA, fmt.Sprintf("soak-%d", i))
		created := false
		for attempt := 0; attempt < 400; attempt++ {
			time.Sleep(pause)
			pr := provider()
			vm, err := pr.VM(ctx, ref)
			switch {
			case err != nil && !errors.Is(err, hypervisor.ErrNotFound):
				continue // a fault: read again
			case err != nil && !created: // not there yet: clone
				_, task, err := pr.Clone(ctx, hypervisor.CloneSpec{Source: src, Target: ref, Name: owner.ClaimName, Owner: owner})
				if err == nil && pollTask(ctx, pr, task) == nil {
					created = true
				}
			case err != nil: // created and gone: done
				return nil
			case vm.Lock != "":
				continue // a task still runs on it
			default: // it exists: its job ran; delete it
				if vm.Owner == nil || vm.Owner.ClaimName != owner.ClaimName {
					return fmt.Errorf("VM %s carries %+v, not claim %s", ref.ID, vm.Owner, owner.ClaimName)
				}
				created = true
				if task, err := pr.DeleteSeen(ctx, vm); err == nil {
					_ = pollTask(ctx, pr, task)
				}
			}
		}
		return fmt.Errorf("claim %d did not settle", i)
	}

	start := time.Now()
	errs := make(chan error, n)
	sem := make(chan struct{}, 12)
	var wg sync.WaitGroup
	restarts := 0
	for i := range n {
		if restarts < 3 && i > 0 && i%max(1, n/4) == 0 {
			mu.Lock()
			p = newTestProvider(t, sim, clusterA, func(c *Config) { c.Timeout = time.Second })
			mu.Unlock()
			restarts++
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs <- lifecycle(i)
		}()
	}
	wg.Wait()
	close(errs)
	settle := time.Since(start)
	sim.ClearFaults()
	failed := 0
	for err := range errs {
		if err != nil {
			failed++
			t.Error(err)
		}
	}
	leaked := 0
	for _, vm := range sim.VMs() {
		if vm.VMID >= 30000 {
			leaked++
			t.Errorf("leaked VM %d (%s)", vm.VMID, vm.Name)
		}
		if before, ok := foreign[vm.VMID]; ok && (before.Status != vm.Status || before.Description != vm.Description) {
			t.Errorf("foreign VM %d was touched", vm.VMID)
		}
	}
	st := sim.LoadStats()
	t.Logf("soak: %d lifecycles, %d provider restarts, settled in %s wall (model ×%g); %d failed, %d leaked; "+
		"lock waits %d, lock timeouts %d, refused %d; load model: %s",
		n, restarts, settle.Round(time.Millisecond), model.TimeScale, failed, leaked, st.LockWaits, st.LockTimeouts, st.Refused, model)
}
