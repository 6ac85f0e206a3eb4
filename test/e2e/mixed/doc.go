// Package mixed is the end-to-end test of a RunnerPool spanning hypervisors: the local fleet with
// --hypervisor=both, one pool whose targets are the Proxmox simulator and the Hyper-V WS-Management
// simulator, each VM running the real agent from its user-data.
package mixed
