package hypervisor

// Usage is a VM's resource usage as one inventory listing reports it. Zero values mean the
// hypervisor did not report the figure.
type Usage struct {
	// CPUs is the number of virtual CPUs; CPULoad the share of them in use (0 to 1).
	CPUs    int
	CPULoad float64
	// MemoryBytes is the VM's memory; MemoryUsedBytes what the guest uses of it.
	MemoryBytes     uint64
	MemoryUsedBytes uint64
	// DiskBytes is the size of the VM's disks; DiskUsedBytes what is written to them, when the
	// hypervisor knows.
	DiskBytes     uint64
	DiskUsedBytes uint64
}
