package machineclaim

import (
	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// History hears of the moments of a VM's life that job records and the audit log keep (the
// manager's history recorder). Calls must not block. A reconcile whose status write fails after a
// call may make it again for the same moment, so implementations merge rather than count.
type History interface {
	// VMCloning: the hypervisor accepted the clone of template into the claim's VM.
	VMCloning(c *infrav1.MachineClaim, hc *infrav1.HypervisorCluster, template hypervisor.Template)
	// VMCloned: the clone finished.
	VMCloned(c *infrav1.MachineClaim, hc *infrav1.HypervisorCluster)
	// VMRunning: the VM was started and runs.
	VMRunning(c *infrav1.MachineClaim, hc *infrav1.HypervisorCluster)
	// VMAttested: the VM's agent proved its identity and fetched its runner configuration.
	VMAttested(c *infrav1.MachineClaim, config *bootstrapv1.BootstrapConfig)
	// VMDestroyed: the VM is gone from its hypervisor; why is the claim's release reason.
	VMDestroyed(c *infrav1.MachineClaim, hc *infrav1.HypervisorCluster, why string)
	// VMChanged: the controller changed a VM that exists (action: start-vm, stop-vm), and why.
	VMChanged(c *infrav1.MachineClaim, action, why string)
}

// noHistory is the History of a manager that keeps none.
type noHistory struct{}

func (noHistory) VMCloning(*infrav1.MachineClaim, *infrav1.HypervisorCluster, hypervisor.Template) {}
func (noHistory) VMCloned(*infrav1.MachineClaim, *infrav1.HypervisorCluster)                       {}
func (noHistory) VMRunning(*infrav1.MachineClaim, *infrav1.HypervisorCluster)                      {}
func (noHistory) VMAttested(*infrav1.MachineClaim, *bootstrapv1.BootstrapConfig)                   {}
func (noHistory) VMDestroyed(*infrav1.MachineClaim, *infrav1.HypervisorCluster, string)            {}
func (noHistory) VMChanged(*infrav1.MachineClaim, string, string)                                  {}

func (r *Reconciler) history() History {
	if r.History == nil {
		return noHistory{}
	}
	return r.History
}
