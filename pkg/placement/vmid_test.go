package placement

import "strconv"

// idOf is a Proxmox VMID as a VM ID.
func idOf(vmid int) string { return strconv.Itoa(vmid) }
