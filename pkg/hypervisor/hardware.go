package hypervisor

import "context"

// PCIMapper is a provider whose cluster passes host PCI devices through by named resource
// mappings (Proxmox VE's Datacenter → Resource Mappings): a VM naming a mapping starts only on a
// node that has a device for it, so placement asks which nodes do. It is optional: without it a
// VM's devices do not steer its placement.
type PCIMapper interface {
	// PCIMappingNodes returns, for each mapping the credentials may see, the nodes that have a
	// device for it. A mapping the credentials may not see is absent.
	PCIMappingNodes(ctx context.Context) (map[string][]string, error)
}

// HardwareChecker is a provider that can tell, without a call to the hypervisor, whether it can
// give a VM the hardware a ConfigSpec asks for (its ExtraDisks, NICs and PCIDevices), so a claim
// asking for what it cannot give is refused before any VM is made. It is optional: without it
// such a claim is refused by Configure, after the clone.
type HardwareChecker interface {
	CheckHardware(spec ConfigSpec) error
}

// FeaturePrivileges is a provider that can say, from its last Verify (without another call),
// which privileges for optional features its credentials lack: each entry names the privilege and
// the feature (snapshots, hooks, migration) that needs it; known is false before a Verify, or when
// the provider cannot tell. A token without them still runs runners; the features fail with
// ErrForbidden when used.
type FeaturePrivileges interface {
	MissingFeaturePrivileges() (missing []string, known bool)
}
