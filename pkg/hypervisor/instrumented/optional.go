package instrumented

import (
	"context"

	"go.opentelemetry.io/otel/attribute"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// The wrapper offers the optional interfaces whatever it wraps, so callers keep one provider
// value; a wrapped provider without the capability answers hypervisor.ErrUnsupported.
var (
	_ hypervisor.Snapshotter  = (*provider)(nil)
	_ hypervisor.GuestExecer  = (*provider)(nil)
	_ hypervisor.StopReporter = (*provider)(nil)
)

func unsupported(op string) error {
	return hypervisor.Errorf(hypervisor.ErrUnsupported, op, "the provider has no %s", op)
}

func (p *provider) Snapshots(ctx context.Context, ref hypervisor.VMRef) ([]hypervisor.Snapshot, error) {
	s, ok := p.next.(hypervisor.Snapshotter)
	if !ok {
		return nil, unsupported("Snapshots")
	}
	ctx, c := p.begin(ctx, "Snapshots", refAttrs(ref)...)
	out, err := s.Snapshots(ctx, ref)
	c.end(err)
	return out, err
}

func (p *provider) CreateSnapshot(ctx context.Context, ref hypervisor.VMRef, spec hypervisor.SnapshotSpec) (hypervisor.TaskID, error) {
	s, ok := p.next.(hypervisor.Snapshotter)
	if !ok {
		return "", unsupported("CreateSnapshot")
	}
	ctx, c := p.begin(ctx, "CreateSnapshot", refAttrs(ref)...)
	id, err := s.CreateSnapshot(ctx, ref, spec)
	p.startedTask(c, id, err)
	return id, err
}

func (p *provider) DeleteSnapshot(ctx context.Context, ref hypervisor.VMRef, name string) (hypervisor.TaskID, error) {
	s, ok := p.next.(hypervisor.Snapshotter)
	if !ok {
		return "", unsupported("DeleteSnapshot")
	}
	ctx, c := p.begin(ctx, "DeleteSnapshot", refAttrs(ref)...)
	id, err := s.DeleteSnapshot(ctx, ref, name)
	p.startedTask(c, id, err)
	return id, err
}

func (p *provider) RollbackSnapshot(ctx context.Context, ref hypervisor.VMRef, name string, start bool) (hypervisor.TaskID, error) {
	s, ok := p.next.(hypervisor.Snapshotter)
	if !ok {
		return "", unsupported("RollbackSnapshot")
	}
	ctx, c := p.begin(ctx, "RollbackSnapshot", refAttrs(ref)...)
	id, err := s.RollbackSnapshot(ctx, ref, name, start)
	p.startedTask(c, id, err)
	return id, err
}

func (p *provider) GuestExec(ctx context.Context, ref hypervisor.VMRef, command []string) (int64, error) {
	g, ok := p.next.(hypervisor.GuestExecer)
	if !ok {
		return 0, unsupported("GuestExec")
	}
	ctx, c := p.begin(ctx, "GuestExec", refAttrs(ref)...)
	pid, err := g.GuestExec(ctx, ref, command)
	c.end(err)
	return pid, err
}

func (p *provider) GuestExecStatus(ctx context.Context, ref hypervisor.VMRef, pid int64) (hypervisor.ExecStatus, error) {
	g, ok := p.next.(hypervisor.GuestExecer)
	if !ok {
		return hypervisor.ExecStatus{}, unsupported("GuestExecStatus")
	}
	ctx, c := p.begin(ctx, "GuestExecStatus", refAttrs(ref)...)
	st, err := g.GuestExecStatus(ctx, ref, pid)
	c.end(err, attribute.Bool("hyperfleet.exec.exited", st.Exited))
	return st, err
}

func (p *provider) LastStop(ctx context.Context, ref hypervisor.VMRef) (hypervisor.StopRecord, error) {
	r, ok := p.next.(hypervisor.StopReporter)
	if !ok {
		return hypervisor.StopRecord{Cause: hypervisor.StopUnknown}, nil
	}
	ctx, c := p.begin(ctx, "LastStop", refAttrs(ref)...)
	rec, err := r.LastStop(ctx, ref)
	c.end(err)
	return rec, err
}

var _ hypervisor.MigrationChecker = (*provider)(nil)

func (p *provider) CheckMigration(ctx context.Context, ref hypervisor.VMRef) (hypervisor.Migratability, error) {
	m, ok := p.next.(hypervisor.MigrationChecker)
	if !ok {
		return hypervisor.Migratability{}, unsupported("CheckMigration")
	}
	ctx, c := p.begin(ctx, "CheckMigration", refAttrs(ref)...)
	out, err := m.CheckMigration(ctx, ref)
	c.end(err)
	return out, err
}

var _ hypervisor.Migrator = (*provider)(nil)

func (p *provider) Migrate(ctx context.Context, ref hypervisor.VMRef, spec hypervisor.MigrateSpec) (hypervisor.TaskID, error) {
	m, ok := p.next.(hypervisor.Migrator)
	if !ok {
		return "", unsupported("Migrate")
	}
	ctx, c := p.begin(ctx, "Migrate", append(refAttrs(ref), attribute.String("hypervisor.target_node", spec.Target))...)
	id, err := m.Migrate(ctx, ref, spec)
	p.startedTask(c, id, err)
	return id, err
}

func (p *provider) CancelTask(ctx context.Context, node string, id hypervisor.TaskID) error {
	m, ok := p.next.(hypervisor.Migrator)
	if !ok {
		return unsupported("CancelTask")
	}
	ctx, c := p.begin(ctx, "CancelTask", AttrVMNode.String(node))
	err := m.CancelTask(ctx, node, id)
	c.end(err)
	return err
}

var _ hypervisor.PCIMapper = (*provider)(nil)

func (p *provider) PCIMappingNodes(ctx context.Context) (map[string][]string, error) {
	m, ok := p.next.(hypervisor.PCIMapper)
	if !ok {
		return nil, unsupported("PCIMappingNodes")
	}
	ctx, c := p.begin(ctx, "PCIMappingNodes")
	out, err := m.PCIMappingNodes(ctx)
	c.end(err)
	return out, err
}

var _ hypervisor.HardwareChecker = (*provider)(nil)

// CheckHardware makes no call to the hypervisor: nothing to trace.
func (p *provider) CheckHardware(spec hypervisor.ConfigSpec) error {
	if c, ok := p.next.(hypervisor.HardwareChecker); ok {
		return c.CheckHardware(spec)
	}
	return nil
}

var _ hypervisor.FeaturePrivileges = (*provider)(nil)

// MissingFeaturePrivileges makes no call to the hypervisor: nothing to trace.
func (p *provider) MissingFeaturePrivileges() ([]string, bool) {
	if f, ok := p.next.(hypervisor.FeaturePrivileges); ok {
		return f.MissingFeaturePrivileges()
	}
	return nil, false
}
