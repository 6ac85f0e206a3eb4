package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
)

// feed prints what a person watching the fleet wants to see: each VM boot and power-off, and a
// summary line whenever the pool, its VMs or the jobs change.
type feed struct {
	mu    sync.Mutex
	out   io.Writer
	quiet bool
}

func newFeed(out io.Writer, quiet bool) *feed { return &feed{out: out, quiet: quiet} }

func (f *feed) printf(format string, args ...any) {
	if f.quiet {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Fprintf(f.out, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func (f *feed) vmEvent(e devfleet.VMEvent) {
	// A Proxmox VM has a number; a Hyper-V or vSphere VM is known by its name.
	vm := "VM " + e.Name
	if e.VMID != 0 {
		vm = fmt.Sprintf("VM %d %s", e.VMID, e.Name)
	}
	switch e.Kind {
	case "booted":
		f.printf("%s booted: hyperfleet-agent attests and starts its runner", vm)
	case "idle":
		f.printf("%s booted without a HyperFleet agent: it runs until stopped", vm)
	case "exited":
		if e.Err != nil {
			f.printf("%s: agent failed (%v), powering off; see its log", vm, e.Err)
		} else {
			f.printf("%s: agent done, powering off", vm)
		}
	case "stopped":
		f.printf("%s stopped", vm)
	}
}

// watch prints the summary line when it changes, until ctx ends.
func (f *feed) watch(ctx context.Context, fleet *devfleet.Fleet) {
	last := ""
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s, err := devfleet.Summarize(sctx, fleet.Client(), &fleet.State)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				f.printf("status: %v", err)
			}
			continue
		}
		if line := s.Line(); line != last {
			f.printf("%s", line)
			last = line
		}
	}
}
