package e2e

import (
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
)

var (
	fleet *devfleet.Fleet
	// boots records when each VM's guest started its agent, for the timings.
	boots = &vmBoots{}
)

type vmBoots struct {
	mu    sync.Mutex
	times []time.Time
}

func (b *vmBoots) observe(e devfleet.VMEvent) {
	if e.Kind != "booted" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.times = append(b.times, time.Now())
}

func (b *vmBoots) first() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.times) == 0 {
		return time.Time{}, false
	}
	return b.times[0], true
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode")
		os.Exit(0)
	}
	os.Exit(devfleet.RunTests("e2e", devfleet.Options{
		Pool:        devfleet.PoolOptions{Min: 1, Max: 5, Labels: []string{"linux", "x64"}},
		JobDuration: 2 * time.Second,
		OnVMEvent:   boots.observe,
	}, func(f *devfleet.Fleet) int { fleet = f; return m.Run() }))
}
