// Package machinesnapshotrestore is the MachineSnapshotRestore controller: it rolls a claim's VM
// back to one of its MachineSnapshots, stopping the VM first where the hypervisor needs it and
// marking the claim so its run strategy does not fight the restore.
package machinesnapshotrestore
