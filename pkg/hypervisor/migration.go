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
