// Package snapshotschedule holds the pure parts of MachineSnapshotSchedules: when the next
// snapshot is due (a five-field cron expression in a time zone) and which snapshots the retention
// policy keeps (the newest N, and the newest of each of the last N days, weeks and months).
package snapshotschedule
