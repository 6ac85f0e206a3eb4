// Package pvesim is a stateful, in-memory Proxmox VE 9.1 API simulator for
// HyperFleet's tests, in the spirit of vcsim for vSphere. It serves
// /api2/json over HTTPS on loopback, validates every request against an
// embedded subset of the real PVE API schema, answers with PVE's JSON types
// and error texts (including the error in the HTTP reason phrase), runs
// clone/start/stop/delete as UPID tasks, and can boot a VM by handing its
// cloud-init NoCloud data to a hook. It also holds SDN zones, VNets, subnets and
// IPAM with PVE's pending edits and apply, cluster security groups and VM firewalls, storage
// definitions, and replication jobs.
//
// Tests drive it through the Go API (New/Start or StartForTest, InjectFault,
// VMs, PowerOff, RemoveVM, Requests); other processes use the admin endpoint
// under /_sim/ (see admin.go). Anything not under /api2/json or /_sim/ is 501.
package pvesim
