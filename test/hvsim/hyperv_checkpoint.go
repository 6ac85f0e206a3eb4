package hvsim

import (
	"time"

	"github.com/google/uuid"
)

// Checkpoints as Hyper-V keeps them: a tree per VM whose current node is the checkpoint the
// running state derives from, names that may repeat, a checkpoint type per VM (Standard,
// Production, ProductionOnly or Disabled) and, after a removal, a merge of the removed
// checkpoint's disk that runs in the background for HyperVConfig.MergeDuration while the VM's
// status reads "Merging disks".

// hvCheckpoint is one checkpoint: the VM's configuration when it was taken and, for a standard
// checkpoint of a running VM, its memory (a saved state).
type hvCheckpoint struct {
	id, name, parent string // parent is the parent checkpoint's id
	created          time.Time
	kind             string // "Standard" or "Production"
	memory           bool
	cpus             int
	ram              int64
	notes            string
}

// VM states a checkpoint reports (VMState): a checkpoint with memory is Saved, others Off.
const hvSaved = 6

// defaultMergeDuration is how long a merge runs when HyperVConfig.MergeDuration is zero.
const defaultMergeDuration = 300 * time.Millisecond

// HyperVCheckpoint is a snapshot of a simulated checkpoint, for assertions.
type HyperVCheckpoint struct {
	ID, Name, Parent, Kind string
	Memory                 bool
}

// Checkpoints returns a VM's checkpoints in the order they were taken.
func (h *HyperV) Checkpoints(host, id string) []HyperVCheckpoint {
	var out []HyperVCheckpoint
	_ = h.withVM(host, id, func(_ *hvHost, vm *hvVM) error {
		for _, c := range vm.checkpoints {
			out = append(out, HyperVCheckpoint{ID: c.id, Name: c.name, Parent: c.parent, Kind: c.kind, Memory: c.memory})
		}
		return nil
	})
	return out
}

// AddCheckpoint takes a standard checkpoint of a VM outside HyperFleet, as an operator with
// Hyper-V Manager could; the name may repeat one the VM has.
func (h *HyperV) AddCheckpoint(host, id, name string) error {
	return h.withVM(host, id, func(_ *hvHost, vm *hvVM) error {
		vm.takeCheckpoint(name, "Standard")
		return nil
	})
}

// SetCheckpointType sets a VM's checkpoint type (Set-VM -CheckpointType): Standard, Production,
// ProductionOnly or Disabled.
func (h *HyperV) SetCheckpointType(host, id, kind string) error {
	return h.withVM(host, id, func(_ *hvHost, vm *hvVM) error { vm.checkpointType = kind; return nil })
}

// Merging reports whether a VM is merging a removed checkpoint's disk.
func (h *HyperV) Merging(host, id string) bool {
	merging := false
	_ = h.withVM(host, id, func(_ *hvHost, vm *hvVM) error { merging = vm.merging(); return nil })
	return merging
}

func (vm *hvVM) merging() bool { return time.Now().Before(vm.mergeUntil) }

func (h *HyperV) mergeDuration() time.Duration {
	if h.cfg.MergeDuration > 0 {
		return h.cfg.MergeDuration
	}
	return defaultMergeDuration
}

// takeCheckpoint is Checkpoint-VM with the VM's checkpoint type set to kind.
func (vm *hvVM) takeCheckpoint(name, kind string) *hvCheckpoint {
	c := &hvCheckpoint{id: uuid.NewString(), name: name, parent: vm.current, created: time.Now().UTC(), kind: kind,
		memory: kind == "Standard" && vm.state == hvRunning, cpus: vm.cpus, ram: vm.memory, notes: vm.notes}
	if kind != "Standard" {
		c.kind = "Production"
	}
	vm.checkpoints = append(vm.checkpoints, c)
	vm.current = c.id
	return c
}

func (h *HyperV) checkpointJSON(c *hvCheckpoint, vm *hvVM) map[string]any {
	parent := ""
	for _, p := range vm.checkpoints {
		if p.id == c.parent {
			parent = p.name
		}
	}
	state := hvOff
	if c.memory {
		state = hvSaved
	}
	return map[string]any{"Id": c.id, "Name": c.name, "Parent": parent, "CreationTime": h.date(c.created),
		"SnapshotType": c.kind, "State": state}
}

// checkpointByName is Get-HFCheckpointByName.
func (vm *hvVM) checkpointByName(name string) (*hvCheckpoint, *hvError) {
	var found []*hvCheckpoint
	for _, c := range vm.checkpoints {
		if c.name == name {
			found = append(found, c)
		}
	}
	switch len(found) {
	case 0:
		return nil, refuse("NotFound", "checkpoint '%s' does not exist on VM %s", name, vm.id)
	case 1:
		return found[0], nil
	}
	return nil, refuse("Ambiguous", "%d checkpoints of VM %s are named '%s'; HyperFleet acts on none of them", len(found), vm.id, name)
}

func (vm *hvVM) refuseMerging() *hvError {
	if vm.merging() {
		return refuse("Busy", "VM %s is merging a removed checkpoint's disk; try again when the merge is done", vm.id)
	}
	return nil
}

func (h *HyperV) getCheckpoints(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.ownedVM(in)
	if err != nil {
		return nil, err
	}
	list := make([]any, 0, len(vm.checkpoints))
	for _, c := range vm.checkpoints {
		list = append(list, h.checkpointJSON(c, vm))
	}
	return map[string]any{"Checkpoints": h.list(list), "Merging": vm.merging()}, nil
}

func (h *HyperV) newCheckpoint(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.ownedVM(in)
	if err != nil {
		return nil, err
	}
	if err := vm.refuseMoving(); err != nil {
		return nil, err
	}
	if vm.checkpointType == "Disabled" {
		return nil, refuse("Invalid", "checkpoints are disabled on VM %s (%s): its CheckpointType is Disabled", in.ID, vm.name)
	}
	if err := vm.refuseMerging(); err != nil {
		return nil, err
	}
	if len(in.Name) == 0 || len(in.Name) > 100 {
		return nil, refuse("Invalid", "Cannot validate argument on parameter 'SnapshotName'.")
	}
	for _, c := range vm.checkpoints {
		if c.name == in.Name {
			return nil, refuse("AlreadyExists", "checkpoint name '%s' already used on VM %s", in.Name, in.ID)
		}
	}
	kind := "ProductionOnly"
	if in.WithMemory {
		kind = "Standard"
	}
	c := vm.takeCheckpoint(in.Name, kind)
	return map[string]any{"Checkpoint": h.checkpointJSON(c, vm)}, nil
}

func (h *HyperV) restoreCheckpoint(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.ownedVM(in)
	if err != nil {
		return nil, err
	}
	if err := vm.refuseMoving(); err != nil {
		return nil, err
	}
	if err := vm.refuseMerging(); err != nil {
		return nil, err
	}
	c, err := vm.checkpointByName(in.Name)
	if err != nil {
		return nil, err
	}
	// Restore-VMSnapshot discards the running state: the VM is turned off, given the checkpoint's
	// configuration and disks, and left Saved (with memory) or Off.
	h.powerOff(vm)
	vm.cpus, vm.memory, vm.notes, vm.current = c.cpus, c.ram, c.notes, c.id
	if c.memory {
		vm.state = hvSaved
	}
	if in.Start || vm.state == hvSaved {
		if _, err := h.startVM(hh, hvInput{ID: vm.id, Expect: in.Expect}); err != nil {
			return nil, err
		}
	}
	return map[string]any{"VM": h.vmJSON(vm)}, nil
}

func (h *HyperV) removeCheckpoint(hh *hvHost, in hvInput) (any, *hvError) {
	vm, err := hh.ownedVM(in)
	if err != nil {
		return nil, err
	}
	if err := vm.refuseMoving(); err != nil {
		return nil, err
	}
	if err := vm.refuseMerging(); err != nil {
		return nil, err
	}
	c, err := vm.checkpointByName(in.Name)
	if err != nil {
		return nil, err
	}
	vm.dropCheckpoint(c)
	vm.mergeUntil = time.Now().Add(h.mergeDuration())
	return map[string]any{"Merging": true}, nil
}

// dropCheckpoint removes c from the tree; its children move up to its parent.
func (vm *hvVM) dropCheckpoint(c *hvCheckpoint) {
	kept := vm.checkpoints[:0]
	for _, o := range vm.checkpoints {
		if o == c {
			continue
		}
		if o.parent == c.id {
			o.parent = c.parent
		}
		kept = append(kept, o)
	}
	vm.checkpoints = kept
	if vm.current == c.id {
		vm.current = c.parent
	}
}

// mergeBeforeRemove is Remove-HFVM's first step on a VM with checkpoints: they are removed and
// merged, and the caller is told to come back.
func (h *HyperV) mergeBeforeRemove(vm *hvVM) *hvError {
	if err := vm.refuseMerging(); err != nil {
		return err
	}
	if n := len(vm.checkpoints); n > 0 {
		vm.checkpoints, vm.current = nil, ""
		vm.mergeUntil = time.Now().Add(h.mergeDuration())
		return refuse("Busy", "VM %s had %d checkpoints; they are being merged, delete it again once that is done", vm.id, n)
	}
	return nil
}
