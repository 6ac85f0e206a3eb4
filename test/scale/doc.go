// Package scale runs HyperFleet at scale through its controllers: the manager as a process of its
// own (so its CPU time and peak memory can be read from /proc), the real Cluster API manager,
// kube-apiserver and etcd, the bootstrap service, the fake GitHub sending webhooks, and the
// Proxmox simulator with its load model on, over loopback only. TestBenchScale (make
// bench-scale) measures a burst of jobs and writes bench-scale.md; TestSoak (make soak) drives VM
// lifecycles through faults and restarts and asserts that nothing leaks, doubles or is lost.
package scale
