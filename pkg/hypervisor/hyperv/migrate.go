package hyperv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Moves between hosts (Move-VM). A running VM moves live; its disks, on storage only its host has,
// move with it when the caller asks for local disks (a shared-nothing live migration,
// -IncludeStorage -DestinationStoragePath, into the destination's disk folder). The destination is
// one of the cluster's hosts, named as Hyper-V hosts know each other: its name in hyperv.hosts.
//
// Move-VM would block for the whole move, and a WinRM call cannot be cancelled, so the module runs
// it as the host's migration job and returns the job's ID; the task HyperFleet keeps is
// "move:<vm guid>:<destination>:<job id>", polled on the source host, and CancelTask asks Hyper-V to
// stop the job. Hyper-V keeps the VM running on the source until the final switch-over: a job
// stopped before then leaves it there; one past that point cannot be stopped and finishes.

var (
	_ hypervisor.Migrator         = (*Provider)(nil)
	_ hypervisor.MigrationChecker = (*Provider)(nil)
)

// Module functions for moves.
const (
	fnTestMove  = "Test-HFMove"
	fnStartMove = "Start-HFMove"
	fnGetMove   = "Get-HFMove"
	fnStopMove  = "Stop-HFMove"
)

const moveTaskPrefix = "move:"

// moveInput is the argument of the move functions.
type moveInput struct {
	ID                     string `json:"Id"`
	Expect                 expectation
	Hosts                  []string `json:",omitempty"`
	Target                 string   `json:",omitempty"`
	Online                 bool     `json:",omitempty"`
	IncludeStorage         bool     `json:",omitempty"`
	DestinationStoragePath string   `json:",omitempty"`
	JobID                  string   `json:"JobId,omitempty"`
}

type wireMoveCheck struct {
	Running    bool
	LocalDisks psList[string]
	Hosts      psList[struct {
		Name     string
		Problems psList[string]
	}]
}

type wireMoveStarted struct {
	JobID string `json:"JobId"`
}

type wireMoveJob struct {
	Found            bool
	JobState         int
	PercentComplete  int
	ErrorDescription string
	Cancellable      bool
}

// CIM_ConcreteJob states: below jobCompleted the job runs.
const (
	jobCompleted  = 7
	jobTerminated = 8
)

// moveTask is the task of a move of vm to target, run by the source's migration job.
type moveTask struct{ vm, target, job string }

func (t moveTask) id() hypervisor.TaskID {
	return hypervisor.TaskID(moveTaskPrefix + t.vm + ":" + t.target + ":" + t.job)
}

func parseMoveTask(id hypervisor.TaskID) (moveTask, error) {
	parts := strings.SplitN(strings.TrimPrefix(string(id), moveTaskPrefix), ":", 3)
	if !strings.HasPrefix(string(id), moveTaskPrefix) || len(parts) != 3 || !guidRe.MatchString(parts[0]) || parts[1] == "" || parts[2] == "" {
		return moveTask{}, fmt.Errorf("%q is not a Hyper-V move task", id)
	}
	return moveTask{vm: parts[0], target: parts[1], job: parts[2]}, nil
}

// CheckMigration asks the VM's host, with Compare-VM, which other hosts could take the VM with its
// storage, and lists its disks on storage only that host has (not an SMB share or a cluster shared
// volume): a shared-nothing move must copy those, so such a VM is not live-migratable without
// withLocalDisks. A host whose live migration is off, whose processor the running VM cannot use or
// that lacks the disk folder or the template disk is not allowed.
func (p *Provider) CheckMigration(ctx context.Context, ref hypervisor.VMRef) (hypervisor.Migratability, error) {
	op := opName("check moves of", ref)
	h, err := p.hostOf(op, ref)
	if err != nil {
		return hypervisor.Migratability{}, err
	}
	others := slices.DeleteFunc(slices.Clone(p.names), func(n string) bool { return n == ref.Node })
	var out wireMoveCheck
	if err := h.call(ctx, op, fnTestMove, moveInput{ID: ref.ID, Expect: p.expect(""), Hosts: others,
		DestinationStoragePath: p.cfg.VHDDirectory}, &out); err != nil {
		return hypervisor.Migratability{}, err
	}
	m := hypervisor.Migratability{Running: out.Running, LocalDisks: out.LocalDisks}
	for _, host := range out.Hosts {
		if len(host.Problems) == 0 && slices.Contains(others, host.Name) {
			m.AllowedHosts = append(m.AllowedHosts, host.Name)
		}
	}
	sort.Strings(m.AllowedHosts)
	return m, nil
}

// Migrate starts moving an owned VM to another host and returns the move's task. Compare-VM's
// findings (live migration off on either host, a processor the running VM cannot use, storage the
// destination cannot reach) refuse the move with ErrInvalid in Hyper-V's words; a VM merging a
// checkpoint or already moving gets ErrBusy.
func (p *Provider) Migrate(ctx context.Context, ref hypervisor.VMRef, spec hypervisor.MigrateSpec) (hypervisor.TaskID, error) {
	op := opName("move", ref)
	h, err := p.hostOf(op, ref)
	if err != nil {
		return "", err
	}
	switch {
	case spec.Target == "":
		return "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "no destination host")
	case spec.Target == ref.Node:
		return "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "the destination %s is the VM's own host", spec.Target)
	case p.hosts[spec.Target] == nil:
		return "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "destination %q is not one of this cluster's hosts %v", spec.Target, p.names)
	}
	in := moveInput{ID: ref.ID, Expect: p.expect(""), Target: spec.Target, Online: spec.Online}
	if spec.WithLocalDisks {
		in.IncludeStorage, in.DestinationStoragePath = true, p.cfg.VHDDirectory
	}
	var out wireMoveStarted
	if err := h.call(ctx, op+" to "+spec.Target, fnStartMove, in, &out); err != nil {
		return "", err
	}
	if out.JobID == "" {
		// Done before the module could see its job: nothing to follow.
		return "", nil
	}
	return moveTask{vm: lowerGUID(ref.ID), target: spec.Target, job: out.JobID}.id(), nil
}

// moveStatus reads a move's migration job on the source host. A job Hyper-V has dropped (it keeps
// an ended job for five minutes) is judged by where the VM is.
func (p *Provider) moveStatus(ctx context.Context, node string, id hypervisor.TaskID) (hypervisor.TaskState, error) {
	op := "follow move task " + string(id)
	t, err := parseMoveTask(id)
	if err != nil {
		return hypervisor.TaskState{}, hypervisor.Errorf(hypervisor.ErrNotFound, op, "%v", err)
	}
	h := p.hosts[node]
	if h == nil {
		return hypervisor.TaskState{}, hypervisor.Errorf(hypervisor.ErrNotFound, op, "host %q is not one of this cluster's hosts %v", node, p.names)
	}
	var job wireMoveJob
	if err := h.call(ctx, op, fnGetMove, moveInput{JobID: t.job}, &job); err != nil {
		return hypervisor.TaskState{}, err
	}
	switch {
	case job.Found && job.JobState < jobCompleted:
		progress := min(max(job.PercentComplete, 0), 100)
		return hypervisor.TaskState{Progress: &progress}, nil
	case job.Found && job.JobState == jobCompleted:
		return hypervisor.TaskState{Done: true}, nil
	case job.Found && job.JobState == jobTerminated:
		return hypervisor.TaskState{Done: true, Err: hypervisor.Errorf(hypervisor.ErrTaskFailed, op,
			"the move to %s was stopped; the VM stays on %s", t.target, node)}, nil
	case job.Found:
		return hypervisor.TaskState{Done: true, Err: hypervisor.Errorf(hypervisor.ErrTaskFailed, op,
			"the move to %s failed (job state %d): %s", t.target, job.JobState, job.ErrorDescription)}, nil
	}
	if dst := p.hosts[t.target]; dst != nil {
		if _, err := dst.getVM(ctx, op, t.vm); err == nil {
			return hypervisor.TaskState{Done: true}, nil
		} else if !errors.Is(err, hypervisor.ErrNotFound) {
			return hypervisor.TaskState{}, err
		}
	}
	return hypervisor.TaskState{Done: true, Err: hypervisor.Errorf(hypervisor.ErrTaskFailed, op,
		"Hyper-V no longer knows migration job %s and VM %s is not on %s", t.job, t.vm, t.target)}, nil
}

// CancelTask stops a move (the migration job's RequestStateChange Terminate). A move that has ended
// is left as it is; one past the switch-over answers ErrBusy and finishes.
func (p *Provider) CancelTask(ctx context.Context, node string, id hypervisor.TaskID) error {
	op := "cancel task " + string(id)
	t, err := parseMoveTask(id)
	if err != nil {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "%v", err)
	}
	ref := hypervisor.VMRef{Node: node, ID: t.vm}
	h, err := p.hostOf(op, ref)
	if err != nil {
		return err
	}
	return h.call(ctx, op, fnStopMove, moveInput{ID: t.vm, Expect: p.expect(""), JobID: t.job}, nil)
}
