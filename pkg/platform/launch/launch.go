// Package launch is how the in-VM agent starts a CI platform's runner for exactly one job, from the
// one-time configuration the bootstrap service handed it. Each platform's launch is a small package
// of its own (pkg/platform/<kind>/launch) that registers here and links nothing of the platform's
// API client; pkg/platform/all/launches links them all into the agent.
package launch

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// Setup is what the agent knows of the runner it starts.
type Setup struct {
	// Directory is the runner's directory in the guest.
	Directory string
	// Program is the runner program's path: Directory joined with the BootstrapConfig's runScript.
	Program string
	// IdleTimeout is how long the runner may wait for its job before it gives up.
	IdleTimeout time.Duration
	// RunnerName is the name the runner registered under.
	RunnerName string
}

// Command is how one platform's runner is started.
type Command struct {
	// Args is the command line, program first.
	Args []string
	// Env is added to the agent's environment: the one-time secret travels here rather than on
	// the command line where a platform's runner reads it from the environment.
	Env []string
	// Files are written (mode 0644) before the runner starts: the CA bundle a platform's API is
	// verified with, when the registration carries one.
	Files map[string][]byte
}

// Func builds the command that runs a platform's runner for one job from its one-time config
// (platform.Registration.Config as the bootstrap service handed it out).
type Func func(config string, s Setup) (Command, error)

var (
	mu    sync.RWMutex
	funcs = map[string]Func{}
)

// Register adds kind's launch; each platform's launch package calls it from an init function.
// Registering a kind twice panics: it is a programming error found at start-up.
func Register(kind string, f Func) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := funcs[kind]; dup || kind == "" || f == nil {
		panic(fmt.Sprintf("launch.Register: %q registered twice or incomplete", kind))
	}
	funcs[kind] = f
}

// For returns kind's launch.
func For(kind string) (Func, bool) {
	mu.RLock()
	defer mu.RUnlock()
	f, ok := funcs[kind]
	return f, ok
}

// Kinds lists the registered kinds, sorted.
func Kinds() []string {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]string, 0, len(funcs))
	for k := range funcs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
