package proxmox

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Replication: one PVE storage replication job per VM, "<vmid>-0". PVE refuses a job for a VM
// with a local volume on a storage without the replicate feature (only ZFS has it), which is
// ErrInvalid.

func replicationID(ref hypervisor.VMRef) string { return vmidSegment(ref.ID) + "-0" }

// EnsureReplication implements hypervisor.Replicator.
func (p *Provider) EnsureReplication(ctx context.Context, job hypervisor.ReplicationJob) error {
	op := opName("ensure replication of", job.VM)
	if job.Target == "" {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "a target node is required")
	}
	if _, err := p.ensureOwned(ctx, op, job.VM); err != nil {
		return err
	}
	id := replicationID(job.VM)
	var have struct {
		Target   string `json:"target"`
		Schedule string `json:"schedule"`
		Rate     number `json:"rate"`
	}
	err := p.get(ctx, op, "/cluster/replication/"+id, &have)
	switch {
	case err != nil && !errors.Is(err, hypervisor.ErrNotFound):
		return err
	case err != nil:
		params := map[string]any{"id": id, "type": "local", "target": job.Target}
		if job.Schedule != "" {
			params["schedule"] = job.Schedule
		}
		if job.RateMBps > 0 {
			params["rate"] = job.RateMBps
		}
		return p.post(ctx, op, "/cluster/replication", params, nil)
	}
	if have.Target != job.Target {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "replication job %s copies to %s: PVE cannot change a job's target; delete it first", id, have.Target)
	}
	params := map[string]any{}
	var del []string
	if have.Schedule != job.Schedule {
		if job.Schedule == "" {
			del = append(del, "schedule")
		} else {
			params["schedule"] = job.Schedule
		}
	}
	if int(have.Rate) != job.RateMBps {
		if job.RateMBps <= 0 {
			del = append(del, "rate")
		} else {
			params["rate"] = job.RateMBps
		}
	}
	if len(params) == 0 && len(del) == 0 {
		return nil
	}
	if len(del) > 0 {
		params["delete"] = strings.Join(del, ",")
	}
	return p.put(ctx, op, "/cluster/replication/"+id, params, nil)
}

// ReplicationState implements hypervisor.Replicator.
func (p *Provider) ReplicationState(ctx context.Context, vm hypervisor.VMRef) (hypervisor.ReplicationState, error) {
	op := opName("get replication of", vm)
	var st struct {
		LastSync  number `json:"last_sync"`
		FailCount number `json:"fail_count"`
		Error     string `json:"error"`
	}
	path := fmt.Sprintf("/nodes/%s/replication/%s/status", url.PathEscape(vm.Node), replicationID(vm))
	if err := p.get(ctx, op, path, &st); err != nil {
		return hypervisor.ReplicationState{}, err
	}
	out := hypervisor.ReplicationState{Error: st.Error}
	if st.LastSync > 0 {
		out.LastSync = time.Unix(int64(st.LastSync), 0)
	}
	if out.Error == "" && st.FailCount > 0 {
		out.Error = fmt.Sprintf("%d failed runs", int(st.FailCount))
	}
	return out, nil
}

var (
	_ hypervisor.Networker  = (*Provider)(nil)
	_ hypervisor.Storager   = (*Provider)(nil)
	_ hypervisor.Replicator = (*Provider)(nil)
)
