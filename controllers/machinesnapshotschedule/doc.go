// Package machinesnapshotschedule is the MachineSnapshotSchedule controller: it makes a
// MachineSnapshot of a claim each time its schedule (pkg/snapshotschedule) is due and deletes the
// oldest beyond the schedule's retention.
package machinesnapshotschedule
