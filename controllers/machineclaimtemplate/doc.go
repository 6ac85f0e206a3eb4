// Package machineclaimtemplate is the MachineClaimTemplate controller: it checks that the VMs a
// template describes can be built on every HypervisorCluster it is used with (the source template
// exists, an allowed node can hold them) and re-checks periodically, so a template removed on the
// hypervisor shows before claims fail.
package machineclaimtemplate
