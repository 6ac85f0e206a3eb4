package console

import (
	"fmt"
	"strconv"
)

// vmidOf is the VMID of a Proxmox VM ID, for the simulator's calls; 0 while there is none.
func vmidOf(id string) int {
	if id == "" {
		return 0
	}
	n, err := strconv.Atoi(id)
	if err != nil {
		panic(fmt.Sprintf("VM ID %q is not a VMID", id))
	}
	return n
}
