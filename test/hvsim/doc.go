// Package hvsim is a WS-Management (WinRM) simulator for HyperFleet's Hyper-V provider tests: a
// SOAP 1.2 server at /wsman with Basic and NTLMv2 authentication over loopback HTTPS, shells,
// commands, streams, WinRM's faults, fault and latency injection and counters. The command a
// client runs is handed to a pluggable Executor; HyperV is the executor that answers the Hyper-V
// provider's module calls against hosts, VMs, disks, checkpoints and migration jobs held in memory.
package hvsim
