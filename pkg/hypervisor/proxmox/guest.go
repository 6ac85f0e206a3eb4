package proxmox

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

var (
	_ hypervisor.GuestExecer  = (*Provider)(nil)
	_ hypervisor.StopReporter = (*Provider)(nil)
)

// GuestExec runs command in an owned VM's guest through the QEMU guest agent (agent/exec). The
// VM is proved ours first: a command is never sent into anyone else's VM.
func (p *Provider) GuestExec(ctx context.Context, ref hypervisor.VMRef, command []string) (int64, error) {
	op := opName("run a command in", ref)
	if len(command) == 0 {
		return 0, hypervisor.Errorf(hypervisor.ErrInvalid, op, "empty command")
	}
	if _, err := p.ensureOwned(ctx, op, ref); err != nil {
		return 0, err
	}
	var res struct {
		PID number `json:"pid"`
	}
	if err := p.post(ctx, op, vmPath(ref, "/agent/exec"), map[string]any{"command": command}, &res); err != nil {
		return 0, guestAgentError(op, err)
	}
	return int64(res.PID), nil
}

// GuestExecStatus reads agent/exec-status. out-data and err-data arrive decoded already.
func (p *Provider) GuestExecStatus(ctx context.Context, ref hypervisor.VMRef, pid int64) (hypervisor.ExecStatus, error) {
	op := opName("read a command's status in", ref)
	var res struct {
		Exited   number `json:"exited"`
		ExitCode number `json:"exitcode"`
		Signal   number `json:"signal"`
		OutData  string `json:"out-data"`
		ErrData  string `json:"err-data"`
	}
	if err := p.get(ctx, op, vmPath(ref, fmt.Sprintf("/agent/exec-status?pid=%d", pid)), &res); err != nil {
		return hypervisor.ExecStatus{}, guestAgentError(op, err)
	}
	return hypervisor.ExecStatus{Exited: res.Exited != 0, ExitCode: int(res.ExitCode), Signal: int(res.Signal),
		Stdout: res.OutData, Stderr: res.ErrData}, nil
}

// guestAgentError classifies PVE's guest agent errors: no agent configured is ErrNoGuestAgent
// (retrying will not help); an agent that does not answer yet stays ErrBusy.
func guestAgentError(op string, err error) error {
	if strings.Contains(errorText(err), "no qemu guest agent configured") {
		return &hypervisor.Error{Class: hypervisor.ErrNoGuestAgent, Op: op, Err: err}
	}
	return err
}

// powerTasks are the task types that start or stop a VM.
var powerTasks = map[string]hypervisor.StopCause{
	"qmstart":    "",
	"qmstop":     hypervisor.StopByHypervisor,
	"qmshutdown": hypervisor.StopByHypervisor,
	"qmrollback": hypervisor.StopByHypervisor,
	"qmigrate":   hypervisor.StopByHypervisor,
}

// LastStop reads the VM's node's task log. PVE records every start and stop asked of it as a
// task (API, CLI, HA); a guest that powers itself off leaves none. So the newest start or stop
// task tells: a stop task means someone stopped the VM from the hypervisor side, a start task
// means nothing stopped it since, and the guest shut down (a crashed QEMU process reads the same:
// PVE keeps no record of it).
func (p *Provider) LastStop(ctx context.Context, ref hypervisor.VMRef) (hypervisor.StopRecord, error) {
	op := opName("read the last stop of", ref)
	var rows []struct {
		UPID      string `json:"upid"`
		Type      string `json:"type"`
		User      string `json:"user"`
		StartTime number `json:"starttime"`
		EndTime   number `json:"endtime"`
		Status    string `json:"status"`
	}
	if err := p.get(ctx, op, fmt.Sprintf("/nodes/%s/tasks?vmid=%s&source=all&limit=50", url.PathEscape(ref.Node), vmidSegment(ref.ID)), &rows); err != nil {
		return hypervisor.StopRecord{}, err
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].StartTime > rows[j].StartTime })
	for _, r := range rows {
		cause, ok := powerTasks[r.Type]
		if !ok || (r.Status != "" && r.Status != "OK" && !strings.HasPrefix(r.Status, "WARNINGS")) {
			continue // a failed task changed nothing
		}
		if cause == "" {
			return hypervisor.StopRecord{Cause: hypervisor.StopByGuest, Time: time.Unix(int64(r.StartTime), 0)}, nil
		}
		return hypervisor.StopRecord{Cause: cause, Task: hypervisor.TaskID(r.UPID), User: r.User,
			Time: time.Unix(int64(r.EndTime), 0)}, nil
	}
	return hypervisor.StopRecord{Cause: hypervisor.StopUnknown}, nil
}
