package hyperv

import (
	"context"
	"errors"
	"regexp"
	"sort"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Checkpoints are Hyper-V's snapshots. A snapshot with memory is a standard checkpoint (disks,
// configuration and the running VM's memory), one without a production checkpoint (the guest's
// backup service quiesces its file systems; no memory). Hyper-V allows two checkpoints of a VM to
// share a name, so HyperFleet keeps its names unique itself: a name the VM already has is refused
// on creation, and a name two checkpoints share (one made by hand) is refused with ErrAmbiguous
// instead of guessed; the module then acts on the one checkpoint by its Id. Removing a checkpoint
// starts a merge of its disk that Hyper-V runs in the background: DeleteSnapshot returns a task
// that is done when the merge is, and the VM reads as locked ("merge") meanwhile.

var _ hypervisor.Snapshotter = (*Provider)(nil)

// Module functions for checkpoints.
const (
	fnCheckpoints       = "Get-HFCheckpoints"
	fnNewCheckpoint     = "New-HFCheckpoint"
	fnRestoreCheckpoint = "Restore-HFCheckpoint"
	fnRemoveCheckpoint  = "Remove-HFCheckpoint"
)

// checkpointNameRe is the snapshot name rule every provider shares (hypervisor.SnapshotSpec):
// Hyper-V would take up to 100 characters of anything, but a name that is portable between
// providers is also one no script can misread.
var checkpointNameRe = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,39}$`)

// checkpointInput is the argument of the checkpoint functions.
type checkpointInput struct {
	ID         string `json:"Id"`
	Expect     expectation
	Name       string
	WithMemory bool `json:",omitempty"`
	Start      bool `json:",omitempty"`
}

type wireCheckpoint struct {
	ID           string `json:"Id"`
	Name         string
	Parent       string
	CreationTime psTime
	SnapshotType string
	State        VMState
}

type wireCheckpoints struct {
	Checkpoints psList[wireCheckpoint]
	Merging     bool
}

type wireMerge struct{ Merging bool }

// checkpointCall runs a checkpoint function on an owned VM after checking the name.
func (p *Provider) checkpointCall(ctx context.Context, op, function string, ref hypervisor.VMRef, in checkpointInput, out any) error {
	if function != fnCheckpoints && !checkpointNameRe.MatchString(in.Name) {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op,
			"checkpoint name %q must start with a letter and hold at most 40 letters, digits, '-' or '_'", in.Name)
	}
	h, err := p.hostOf(op, ref)
	if err != nil {
		return err
	}
	in.ID, in.Expect = ref.ID, p.expect("")
	return h.call(ctx, op, function, in, out)
}

// Snapshots lists an owned VM's checkpoints, oldest first. Hyper-V has no descriptions; a
// checkpoint in the Saved state holds memory.
func (p *Provider) Snapshots(ctx context.Context, ref hypervisor.VMRef) ([]hypervisor.Snapshot, error) {
	var out wireCheckpoints
	if err := p.checkpointCall(ctx, opName("list checkpoints of", ref), fnCheckpoints, ref, checkpointInput{}, &out); err != nil {
		return nil, err
	}
	list := make([]hypervisor.Snapshot, 0, len(out.Checkpoints))
	for _, c := range out.Checkpoints {
		list = append(list, hypervisor.Snapshot{Name: c.Name, Parent: c.Parent, Time: c.CreationTime.Time,
			WithMemory: c.State == VMStateSaved})
	}
	sort.SliceStable(list, func(i, j int) bool { return list[i].Time.Before(list[j].Time) })
	return list, nil
}

// CreateSnapshot takes a checkpoint (Checkpoint-VM): standard with memory, production without.
// It is done when it returns. A name the VM already has fails with ErrAlreadyExists, a VM whose
// checkpoints are disabled with ErrInvalid, a VM merging a removed checkpoint with ErrBusy.
func (p *Provider) CreateSnapshot(ctx context.Context, ref hypervisor.VMRef, spec hypervisor.SnapshotSpec) (hypervisor.TaskID, error) {
	return "", p.checkpointCall(ctx, opName("checkpoint", ref), fnNewCheckpoint, ref,
		checkpointInput{Name: spec.Name, WithMemory: spec.WithMemory}, nil)
}

// DeleteSnapshot removes a checkpoint (Remove-VMSnapshot). The checkpoint is gone from the list
// at once; the returned task is done when Hyper-V has merged its disk.
func (p *Provider) DeleteSnapshot(ctx context.Context, ref hypervisor.VMRef, name string) (hypervisor.TaskID, error) {
	var out wireMerge
	if err := p.checkpointCall(ctx, opName("remove checkpoint "+name+" of", ref), fnRemoveCheckpoint, ref,
		checkpointInput{Name: name}, &out); err != nil {
		return "", err
	}
	if !out.Merging {
		return "", nil
	}
	return mergeTask(ref), nil
}

// RollbackSnapshot applies a checkpoint (Restore-VMSnapshot). Hyper-V leaves the VM Off, or Saved
// after a checkpoint with memory; the module starts it when start is set and always after a
// checkpoint with memory, so it resumes where it was, as the Snapshotter contract says.
func (p *Provider) RollbackSnapshot(ctx context.Context, ref hypervisor.VMRef, name string, start bool) (hypervisor.TaskID, error) {
	return "", p.checkpointCall(ctx, opName("apply checkpoint "+name+" of", ref), fnRestoreCheckpoint, ref,
		checkpointInput{Name: name, Start: start}, nil)
}

// Tasks. VM operations are synchronous; what Hyper-V runs in the background after a call returns
// (a checkpoint merge, a move) is a task whose ID says what to look at.
const mergeTaskPrefix = "merge:"

func mergeTask(ref hypervisor.VMRef) hypervisor.TaskID {
	return hypervisor.TaskID(mergeTaskPrefix + ref.ID)
}

// mergeStatus reads whether the VM still merges; a VM that is gone merges nothing.
func (p *Provider) mergeStatus(ctx context.Context, node, vmID string) (hypervisor.TaskState, error) {
	ref := hypervisor.VMRef{Node: node, ID: vmID}
	op := opName("follow the checkpoint merge of", ref)
	h, err := p.hostOf(op, ref)
	if err != nil {
		return hypervisor.TaskState{}, err
	}
	w, err := h.getVM(ctx, op, vmID)
	switch {
	case errors.Is(err, hypervisor.ErrNotFound):
		return hypervisor.TaskState{Done: true}, nil
	case err != nil:
		return hypervisor.TaskState{}, err
	}
	return hypervisor.TaskState{Done: !w.Merging}, nil
}

// TaskStatus follows what Hyper-V runs in the background: the empty task is done, a merge is done
// when the VM's status no longer says so, a move when its migration job has ended.
func (p *Provider) TaskStatus(ctx context.Context, node string, id hypervisor.TaskID) (hypervisor.TaskState, error) {
	switch s := string(id); {
	case s == "":
		return hypervisor.TaskState{Done: true}, nil
	case strings.HasPrefix(s, mergeTaskPrefix):
		return p.mergeStatus(ctx, node, strings.TrimPrefix(s, mergeTaskPrefix))
	case strings.HasPrefix(s, moveTaskPrefix):
		return p.moveStatus(ctx, node, id)
	}
	return hypervisor.TaskState{}, hypervisor.Errorf(hypervisor.ErrNotFound, "task status", "%q on %s is not a task HyperFleet started on Hyper-V", id, node)
}
