package hypervisor

import "context"

// VMLister lists every VM of a hypervisor cluster, HyperFleet's and everyone else's, so people
// can see what runs there. It is optional. A VM whose Owner is nil is foreign (another
// installation's VMs included) and must never be changed.
type VMLister interface {
	AllVMs(ctx context.Context) ([]VM, error)
}
