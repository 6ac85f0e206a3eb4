package proxmox

import (
	"context"
	"net/url"
	"regexp"
	"sort"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

var _ hypervisor.Snapshotter = (*Provider)(nil)

// snapshotNameRe is PVE's pve-configid format, which snapshot names must match (at most 40).
var snapshotNameRe = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_\-]{0,39}$`)

// Snapshots lists an owned VM's snapshots (GET …/snapshot), oldest first, without "current",
// PVE's entry for the live state.
func (p *Provider) Snapshots(ctx context.Context, ref hypervisor.VMRef) ([]hypervisor.Snapshot, error) {
	op := opName("list snapshots of", ref)
	if _, err := p.ensureOwned(ctx, op, ref); err != nil {
		return nil, err
	}
	var rows []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Parent      string `json:"parent"`
		SnapTime    number `json:"snaptime"`
		VMState     number `json:"vmstate"`
	}
	if err := p.get(ctx, op, vmPath(ref, "/snapshot"), &rows); err != nil {
		return nil, err
	}
	out := make([]hypervisor.Snapshot, 0, len(rows))
	for _, r := range rows {
		if r.Name == "current" {
			continue
		}
		s := hypervisor.Snapshot{Name: r.Name, Description: r.Description, Parent: r.Parent, WithMemory: r.VMState != 0}
		if r.SnapTime > 0 {
			s.Time = time.Unix(int64(r.SnapTime), 0)
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}

// CreateSnapshot takes a snapshot (POST …/snapshot, task qmsnapshot). PVE checks the name, the
// lock and the storage's snapshot feature in the task, so those failures arrive through
// TaskStatus with PVE's text ("snapshot name 'x' already used", "snapshot feature is not
// available", "VM is locked (backup)").
func (p *Provider) CreateSnapshot(ctx context.Context, ref hypervisor.VMRef, spec hypervisor.SnapshotSpec) (hypervisor.TaskID, error) {
	op := opName("snapshot", ref)
	if !snapshotNameRe.MatchString(spec.Name) {
		return "", hypervisor.Errorf(hypervisor.ErrInvalid, op,
			"snapshot name %q must start with a letter and hold at most 40 letters, digits, '-' or '_'", spec.Name)
	}
	if _, err := p.ensureOwned(ctx, op, ref); err != nil {
		return "", err
	}
	params := map[string]any{"snapname": spec.Name}
	if spec.Description != "" {
		params["description"] = spec.Description
	}
	if spec.WithMemory {
		params["vmstate"] = 1
	}
	var id string
	if err := p.post(ctx, op, vmPath(ref, "/snapshot"), params, &id); err != nil {
		return "", err
	}
	return hypervisor.TaskID(id), nil
}

// DeleteSnapshot removes a snapshot (DELETE …/snapshot/{name}, task qmdelsnapshot).
func (p *Provider) DeleteSnapshot(ctx context.Context, ref hypervisor.VMRef, name string) (hypervisor.TaskID, error) {
	op := opName("delete snapshot "+name+" of", ref)
	if !snapshotNameRe.MatchString(name) {
		return "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "%q is not a snapshot name", name)
	}
	if _, err := p.ensureOwned(ctx, op, ref); err != nil {
		return "", err
	}
	var id string
	if err := p.delete(ctx, op, vmPath(ref, "/snapshot/"+url.PathEscape(name)), &id); err != nil {
		return "", err
	}
	return hypervisor.TaskID(id), nil
}

// RollbackSnapshot returns the VM to a snapshot (POST …/snapshot/{name}/rollback, task
// qmrollback). PVE stops a running VM itself.
func (p *Provider) RollbackSnapshot(ctx context.Context, ref hypervisor.VMRef, name string, start bool) (hypervisor.TaskID, error) {
	op := opName("roll back to snapshot "+name+" of", ref)
	if !snapshotNameRe.MatchString(name) {
		return "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "%q is not a snapshot name", name)
	}
	if _, err := p.ensureOwned(ctx, op, ref); err != nil {
		return "", err
	}
	params := map[string]any{}
	if start {
		params["start"] = 1
	}
	var id string
	if err := p.post(ctx, op, vmPath(ref, "/snapshot/"+url.PathEscape(name)+"/rollback"), params, &id); err != nil {
		return "", err
	}
	return hypervisor.TaskID(id), nil
}
