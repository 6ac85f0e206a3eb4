package proxmox

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// upid is a parsed Proxmox task ID: UPID:node:pid:pstart:starttime:type:id:user:
type upid struct {
	raw, node, kind, id string
}

func parseUPID(s string) (upid, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 9 || parts[0] != "UPID" || parts[1] == "" {
		return upid{}, fmt.Errorf("%q is not a Proxmox UPID", s)
	}
	return upid{raw: s, node: parts[1], kind: parts[5], id: parts[6]}, nil
}

// taskStatus is GET /nodes/{node}/tasks/{upid}/status.
type taskStatus struct {
	Status     string `json:"status"`
	ExitStatus string `json:"exitstatus"`
}

// TaskStatus polls a task by its UPID alone: the node is read from the UPID, so a new process can
// resume a task an earlier one started. node, when set, must agree with it. An empty id is a call
// that completed synchronously and is reported done.
func (p *Provider) TaskStatus(ctx context.Context, node string, id hypervisor.TaskID) (hypervisor.TaskState, error) {
	if id == "" {
		return hypervisor.TaskState{Done: true}, nil
	}
	op := "get task " + string(id)
	u, err := parseUPID(string(id))
	if err != nil {
		return hypervisor.TaskState{}, hypervisor.Errorf(hypervisor.ErrInvalid, op, "%v", err)
	}
	if node != "" && node != u.node {
		return hypervisor.TaskState{}, hypervisor.Errorf(hypervisor.ErrInvalid, op, "task runs on node %q, not %q", u.node, node)
	}
	var st taskStatus
	if err := p.get(ctx, op, fmt.Sprintf("/nodes/%s/tasks/%s/status", u.node, url.PathEscape(u.raw)), &st); err != nil {
		return hypervisor.TaskState{}, err
	}
	if st.Status == "running" {
		return hypervisor.TaskState{}, nil
	}
	return hypervisor.TaskState{Done: true, Err: taskError(u, st.ExitStatus)}, nil
}

// taskError interprets a finished task's exit status: "OK" and "WARNINGS: n" are success, anything
// else is the error text. go-proxmox's Task.Wait returns nil for failed tasks, so this is the only
// place a failure is noticed.
func taskError(u upid, exit string) error {
	if exit == "OK" || strings.HasPrefix(exit, "WARNINGS") {
		return nil
	}
	if u.kind == "qmstart" && strings.Contains(exit, "already running") {
		// Start is idempotent for HyperFleet: the VM is in the state asked for.
		return nil
	}
	if u.kind == "resize" && isShrinkRefusal(exit) {
		// A disk already larger than asked for satisfies the request.
		return nil
	}
	if exit == "" {
		exit = "no exit status"
	}
	if classOfMessage(exit) == hypervisor.ErrLockTimeout {
		// The task waited for a storage or config lock in vain: too much at once, not this VM.
		return hypervisor.Errorf(hypervisor.ErrTaskFailed, fmt.Sprintf("task %s %s on %s", u.kind, u.id, u.node), "%w: %s", hypervisor.ErrLockTimeout, exit)
	}
	return hypervisor.Errorf(hypervisor.ErrTaskFailed, fmt.Sprintf("task %s %s on %s", u.kind, u.id, u.node), "%s", exit)
}

// waitTask polls a task this package started until it ends, within one call timeout. It is used
// where one call must order two steps: the ISO upload before the config write that attaches it
// (Configure), the stop before the destroy (Delete). These are PVE's short worker tasks, which take
// about a second: the first read comes after shortTaskPolls poll intervals (1.2 s at the default
// 200 ms), when such a task has usually ended; reading from the first interval on took three reads
// per task. Later reads back off from the poll interval, doubling up to 2 s.
func (p *Provider) waitTask(ctx context.Context, op string, id string) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	delay, next := shortTaskPolls*p.cfg.TaskPollInterval, p.cfg.TaskPollInterval
	for {
		select {
		case <-ctx.Done():
			return hypervisor.Errorf(hypervisor.ErrBusy, op, "task %s still running: %v", id, ctx.Err())
		case <-time.After(delay):
		}
		st, err := p.TaskStatus(ctx, "", hypervisor.TaskID(id))
		if err != nil {
			return err
		}
		if st.Done {
			return st.Err
		}
		delay, next = next, min(2*next, 2*time.Second)
	}
}

// shortTaskPolls is when a short task is first read, in poll intervals: PVE's worker tasks for an
// upload, a stop or a volume deletion take about a second, give or take a fifth.
const shortTaskPolls = 6
