package hvsim

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Moves as Hyper-V runs them: Compare-VM's checks against the destination, then a migration job
// (Msvm_MigrationJob) on the source host that runs for HyperVConfig.MoveDuration, reports its
// progress and, when it completes, leaves the VM (same GUID) on the destination, with its own
// disks moved to the destination storage path when the move includes storage. The VM keeps
// running on the source until then; a job stopped before it completes leaves the VM where it was.
//
// Hyper-V's defaults: live migration is disabled on a host until an operator enables it
// (Enable-VMMigration), so every host starts with migration off; hosts share one processor model
// unless SetProcessor says otherwise. The refusal texts are the simulator's, except the processor
// one, which follows Hyper-V's.

// defaultMoveDuration is how long a move runs when HyperVConfig.MoveDuration is zero.
const defaultMoveDuration = 500 * time.Millisecond

// CIM_ConcreteJob JobState values.
const (
	jobRunning    = 4
	jobCompleted  = 7
	jobTerminated = 8
	jobException  = 10
)

// hvMove is one migration job, kept on its source host.
type hvMove struct {
	id, vm, source, target string
	includeStorage         bool
	storagePath            string
	started                time.Time
	duration               time.Duration
	state                  int
	errText                string
	failWith               string
}

// HyperVMove is a snapshot of a migration job, for assertions.
type HyperVMove struct {
	ID, VM, Source, Target string
	State                  int
	Error                  string
}

// EnableMigration turns a host's live migration on or off (Enable-VMMigration / Disable-VMMigration).
func (h *HyperV) EnableMigration(host string, enabled bool) error {
	return h.withHost(host, func(hh *hvHost) error { hh.migration = enabled; return nil })
}

// SetProcessor sets a host's processor model; a running VM moves live only between hosts of one
// model unless its processor compatibility mode is on (SetProcessorCompatibility).
func (h *HyperV) SetProcessor(host, model string) error {
	return h.withHost(host, func(hh *hvHost) error { hh.processor = model; return nil })
}

// SetProcessorCompatibility turns a VM's processor compatibility for migration on or off
// (Set-VMProcessor -CompatibilityForMigrationEnabled).
func (h *HyperV) SetProcessorCompatibility(host, id string, on bool) error {
	return h.withVM(host, id, func(_ *hvHost, vm *hvVM) error { vm.processorCompat = on; return nil })
}

// RemoveStorage makes a folder (and everything under it) unavailable on a host: a drive or share
// that is not there.
func (h *HyperV) RemoveStorage(host, dir string) error {
	return h.withHost(host, func(hh *hvHost) error { hh.missing = append(hh.missing, key(strings.TrimRight(dir, `\`))); return nil })
}

// FailNextMove makes the next move from host fail while it runs, with message as the job's error.
func (h *HyperV) FailNextMove(host, message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.moveFaults[host] = message
}

// Moves lists the migration jobs of a host, oldest first.
func (h *HyperV) Moves(host string) []HyperVMove {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []HyperVMove
	if hh := h.hosts[host]; hh != nil {
		for _, m := range hh.moves {
			h.advanceMove(m)
			out = append(out, HyperVMove{ID: m.id, VM: m.vm, Source: m.source, Target: m.target, State: m.state, Error: m.errText})
		}
	}
	return out
}

func (h *HyperV) moveDuration() time.Duration {
	if h.cfg.MoveDuration > 0 {
		return h.cfg.MoveDuration
	}
	return defaultMoveDuration
}

func (hh *hvHost) storageMissing(path string) bool {
	p := key(path)
	for _, m := range hh.missing {
		if p == m || strings.HasPrefix(p, m+`\`) {
			return true
		}
	}
	return false
}

// sharedPath: an SMB share or a cluster shared volume, which every host reaches.
func sharedPath(p string) bool {
	return strings.HasPrefix(p, `\\`) || strings.HasPrefix(key(p), `c:\clusterstorage\`)
}

// compare is Compare-VM: what keeps vm on hh from moving to target; an error when it cannot
// compare at all.
func (h *HyperV) compare(hh *hvHost, vm *hvVM, target string, includeStorage bool, storagePath string) ([]string, *hvError) {
	th := h.hosts[target]
	if th == nil || target == hh.name {
		if th == nil {
			return nil, refuse("Failed", "Failed to establish a connection with host '%s': No credentials are available in the security package.", target)
		}
		return nil, refuse("Invalid", "The virtual machine '%s' is already on host '%s'.", vm.name, target)
	}
	if !hh.migration {
		return nil, refuse("Invalid", "Virtual machine migration is not enabled on host '%s': incoming and outgoing live migrations are turned off (Enable-VMMigration).", strings.ToUpper(hh.name))
	}
	if !th.migration {
		return nil, refuse("Invalid", "Virtual machine migration is not enabled on host '%s': it does not accept incoming live migrations (Enable-VMMigration).", strings.ToUpper(th.name))
	}
	var problems []string
	if vm.state == hvRunning && hh.processor != th.processor && !vm.processorCompat {
		problems = append(problems, fmt.Sprintf("The virtual machine '%s' is using processor-specific features not supported on physical computer '%s'.", vm.name, strings.ToUpper(th.name)))
	}
	if vm.state == hvRunning && th.memory-th.usedMemory() < vm.memory {
		problems = append(problems, fmt.Sprintf("Not enough memory on '%s' to run the virtual machine '%s'.", strings.ToUpper(th.name), vm.name))
	}
	for _, d := range vm.disks {
		f := hh.files[key(d)]
		switch {
		case sharedPath(d):
		case !includeStorage:
			problems = append(problems, fmt.Sprintf("The virtual hard disk '%s' is on storage that '%s' cannot reach; move the virtual machine with its storage.", d, strings.ToUpper(th.name)))
		case f != nil && f.parent != "" && !sharedPath(f.parent) && th.files[key(f.parent)] == nil:
			problems = append(problems, fmt.Sprintf("The parent virtual hard disk '%s' of '%s' does not exist on '%s'.", f.parent, d, strings.ToUpper(th.name)))
		}
	}
	if includeStorage && (!isAbsWindowsPath(storagePath) || th.storageMissing(storagePath)) {
		problems = append(problems, fmt.Sprintf("The destination storage path '%s' could not be found on '%s'.", storagePath, strings.ToUpper(th.name)))
	}
	return problems, nil
}

func (h *HyperV) testMove(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.ownedVM(in)
	if err != nil {
		return nil, err
	}
	var local []string
	for _, d := range vm.disks {
		if !sharedPath(d) {
			local = append(local, d)
		}
	}
	hosts := []any{}
	for _, t := range in.Hosts {
		problems, cerr := h.compare(hh, vm, t, true, in.DestinationStoragePath)
		if cerr != nil {
			problems = []string{cerr.message}
		}
		hosts = append(hosts, map[string]any{"Name": t, "Problems": h.strings(problems)})
	}
	return map[string]any{"Running": vm.state == hvRunning, "LocalDisks": h.strings(local), "Hosts": h.list(hosts)}, nil
}

func (h *HyperV) startMove(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.ownedVM(in)
	if err != nil {
		return nil, err
	}
	if err := vm.refuseMerging(); err != nil {
		return nil, err
	}
	if vm.moving != "" {
		return nil, refuse("Busy", "VM %s is being moved already", vm.id)
	}
	if vm.state == hvRunning && !in.Online {
		return nil, refuse("Invalid", "VM %s is running; a running VM moves live only (Online)", in.ID)
	}
	problems, cerr := h.compare(hh, vm, in.Target, in.IncludeStorage, in.DestinationStoragePath)
	if cerr != nil {
		return nil, cerr
	}
	if len(problems) > 0 {
		return nil, refuse("Invalid", "VM %s cannot move to %s: %s", in.ID, in.Target, strings.Join(problems, " "))
	}
	m := &hvMove{id: strings.ToUpper(uuid.NewString()), vm: vm.id, source: hh.name, target: in.Target, includeStorage: in.IncludeStorage,
		storagePath: in.DestinationStoragePath, started: time.Now(), duration: h.moveDuration(), state: jobRunning, failWith: h.moveFaults[hh.name]}
	delete(h.moveFaults, hh.name)
	hh.moves = append(hh.moves, m)
	vm.moving = m.id
	time.AfterFunc(m.duration, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.advanceMove(m)
	})
	return map[string]any{"JobId": m.id}, nil
}

// advanceMove ends a move whose time is up. Called with h.mu held.
func (h *HyperV) advanceMove(m *hvMove) {
	if m.state != jobRunning || time.Since(m.started) < m.duration {
		return
	}
	src, dst := h.hosts[m.source], h.hosts[m.target]
	vm := src.vms[m.vm]
	if vm == nil {
		m.state, m.errText = jobException, "The virtual machine no longer exists on the source."
		return
	}
	vm.moving = ""
	if m.failWith != "" {
		m.state, m.errText = jobException, m.failWith
		return
	}
	if m.includeStorage {
		for i, d := range vm.disks {
			f := src.files[key(d)]
			if f == nil || sharedPath(d) {
				continue
			}
			moved := *f
			moved.path = strings.TrimRight(m.storagePath, `\`) + `\` + d[strings.LastIndex(d, `\`)+1:]
			delete(src.files, key(d))
			dst.files[key(moved.path)] = &moved
			vm.disks[i] = moved.path
		}
	}
	delete(src.vms, vm.id)
	dst.vms[vm.id] = vm
	m.state = jobCompleted
}

func (h *HyperV) getMove(hh *hvHost, in hvInput) (any, *hvError) {
	for _, m := range hh.moves {
		if m.id == in.JobID {
			h.advanceMove(m)
			pct := 100
			if m.state == jobRunning {
				pct = min(99, int(100*time.Since(m.started)/m.duration))
			}
			return map[string]any{"Found": true, "JobState": m.state, "PercentComplete": pct, "ErrorDescription": m.errText,
				"Cancellable": m.state == jobRunning}, nil
		}
	}
	return map[string]any{"Found": false}, nil
}

func (h *HyperV) stopMove(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.ownedVM(in)
	if err != nil {
		return nil, err
	}
	for _, m := range hh.moves {
		if m.id != in.JobID || m.vm != vm.id {
			continue
		}
		h.advanceMove(m)
		if m.state == jobRunning {
			// Stopped before the switch-over: the VM stays on the source, running as it was.
			m.state, m.errText = jobTerminated, "The operation was cancelled."
			vm.moving = ""
		}
		return map[string]any{"JobState": m.state}, nil
	}
	return nil, refuse("NotFound", "VM %s has no migration job %s on %s", in.ID, in.JobID, strings.ToUpper(hh.name))
}

// refuseMoving is what the VM's other operations answer while it moves.
func (vm *hvVM) refuseMoving() *hvError {
	if vm.moving != "" {
		return refuse("Busy", "VM %s is being moved (migration job %s)", vm.id, vm.moving)
	}
	return nil
}

// ForgetMoves drops a host's ended migration jobs, as Hyper-V does five minutes after they end.
func (h *HyperV) ForgetMoves(host string) error {
	return h.withHost(host, func(hh *hvHost) error {
		kept := hh.moves[:0]
		for _, m := range hh.moves {
			h.advanceMove(m)
			if m.state == jobRunning {
				kept = append(kept, m)
			}
		}
		hh.moves = kept
		return nil
	})
}
