package main

// MachineSnapshotSchedules name IANA time zones, and the manager's image carries no zoneinfo
// files: the database is compiled in instead (about 450 kB).
import _ "time/tzdata"
