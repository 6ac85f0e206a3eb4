package hypervisor

import "context"

// Migratability is what would keep a VM from moving to another host while it runs.
type Migratability struct {
	Running bool
	// LocalDisks are disks (CD-ROMs included) on storage only the VM's host has.
	LocalDisks []string
	// LocalResources are host devices (PCI, USB) the VM uses.
	LocalResources []string
	// AllowedHosts are the hosts the hypervisor would move the VM to; the HypervisorCluster's
	// allowedNodes are not applied yet.
	AllowedHosts []string
}

// LiveMigratable reports whether nothing keeps the running VM from moving live to some host.
func (m Migratability) LiveMigratable() bool {
	return m.Running && len(m.LocalDisks) == 0 && len(m.LocalResources) == 0 && len(m.AllowedHosts) > 0
}

// MigrationChecker asks the hypervisor whether a VM could migrate. It is optional: without it a
// VM's live migratability is unknown.
type MigrationChecker interface {
	CheckMigration(ctx context.Context, ref VMRef) (Migratability, error)
}

// MigrateSpec asks for a VM to move to another host.
type MigrateSpec struct {
	// Target is the host to move to; it must not be the VM's own.
	Target string
	// Online moves a running VM live. A running VM is refused without it; a stopped VM moves
	// offline whatever it says.
	Online bool
	// WithLocalDisks copies disks on storage only the source has; without it a running VM with
	// such disks is refused.
	WithLocalDisks bool
}

// Migrator moves VMs between hosts. It is optional: without it MachineMigrations fail with
// ErrUnsupported. Migrate returns the task to poll with TaskStatus; the hypervisor's refusals
// (a running VM without Online, host devices, local disks, the VM's own host as target) come back
// either from the call (ErrInvalid; ErrBusy for a locked VM) or as a failed task, in the hypervisor's words.
// CancelTask stops a running task, as far as the hypervisor allows: a migration stopped
// part-way leaves the VM on its source host.
type Migrator interface {
	Migrate(ctx context.Context, ref VMRef, spec MigrateSpec) (TaskID, error)
	CancelTask(ctx context.Context, node string, id TaskID) error
}
