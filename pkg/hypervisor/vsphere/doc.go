// Package vsphere is HyperFleet's VMware vSphere provider, on govmomi: vCenter's SOAP API with one
// session per provider (kept alive, logged in again when vCenter ends it), the CA of the vCenter
// verified by default.
//
// How HyperFleet's model maps onto vSphere:
//   - A VM's ID is its instance UUID, which HyperFleet chooses before the clone (the clone's
//     ConfigSpec sets it), so a clone's VM is known by its ID while vCenter still copies it; its
//     node is the ESXi host it runs on.
//   - Ownership lives in the VM's ExtraConfig (advanced settings) under hyperfleet.* keys, written
//     atomically with the clone: the installation ID and the HypervisorCluster's namespace/name
//     decide ownership, so two installations with same-named objects never take each other's VMs.
//     Keys without the guestinfo. prefix are not visible to the guest.
//   - Templates are vSphere templates of the datacenter, selected by instance UUID or name, and by
//     tags kept in their hyperfleet.tags advanced setting; a template serves every host of the
//     compute cluster (its disks are on shared storage). A clone is linked (a child disk of the
//     template's current snapshot, createNewChildDiskBacking) when the template has a snapshot and
//     a full copy otherwise.
//   - Bootstrap data reaches the guest through cloud-init's VMware datasource: guestinfo.userdata
//     and guestinfo.metadata, base64-encoded, in ExtraConfig. Anyone who can read the VM's
//     configuration in vCenter can read them, so EjectCloudInit removes them once the join token is
//     spent.
//   - Long operations return the vCenter task's managed object ID ("task-123") as the TaskID.
//   - A VirtualNetwork is the distributed port group hf-<ID> on a distributed switch (the one
//     Uplink names, or the only one), marked in its description with the same installation and
//     HypervisorCluster identity as the VMs: a VLAN network's ports are tagged by vSphere, an
//     Isolated network's port group has no uplink. A NIC's bandwidth cap is its port group's
//     traffic shaping, which vSphere applies to each port. Overlays, firewall rules, DHCP and NAT
//     need NSX and are gaps; there is no IPAM, so addresses reach the guest through cloud-init.
//   - A StoragePool is an existing datastore, adopted: HyperFleet reads its capacity per host and
//     never makes, changes or deletes a datastore.
//
// Tested against govmomi's vcsim (test/vspheresim) over the wire with govmomi's own client; not yet
// against a real vCenter.
package vsphere
