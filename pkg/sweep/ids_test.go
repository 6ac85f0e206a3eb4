package sweep

import "strconv"

// idOf is a Proxmox VMID as a VM ID; the sweep treats IDs as opaque text.
func idOf(vmid int) string { return strconv.Itoa(vmid) }

func vmidOf(id string) int {
	n, err := strconv.Atoi(id)
	if err != nil {
		panic(err)
	}
	return n
}
