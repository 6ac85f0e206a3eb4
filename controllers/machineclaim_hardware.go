package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// reconcileHardwareSupport refuses, before any VM is made, a claim asking for hardware its
// provider cannot give: silently dropping a disk would leave the guest without the storage it
// was declared with.
func (r *MachineClaimReconciler) reconcileHardwareSupport(_ context.Context, s *claimScope) (ctrl.Result, error) {
	if s.provider == nil || s.claim.Status.VMID != "" {
		return ctrl.Result{}, nil
	}
	if missing := missingHardware(s.claim, s.provider.Capabilities()); len(missing) > 0 {
		s.terminal = true
		setVMCondition(s.claim, metav1.ConditionFalse, infrav1.UnsupportedHardwareReason,
			fmt.Sprintf("HypervisorCluster %s cannot give this claim %s: remove them or use a cluster whose provider has them",
				s.hc.Name, strings.Join(missing, ", ")))
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	return ctrl.Result{}, nil
}

// missingHardware names the claim's hardware settings the provider lacks the capability for.
func missingHardware(c *infrav1.MachineClaim, caps hypervisor.Capabilities) []string {
	var missing []string
	if len(c.Spec.Disks) > 0 && !caps.ExtraDisks {
		missing = append(missing, "extra disks (spec.disks)")
	}
	return missing
}

// extraDisks is the claim's spec.disks for the provider.
func extraDisks(c *infrav1.MachineClaim) []hypervisor.ExtraDisk {
	var out []hypervisor.ExtraDisk
	for _, d := range c.Spec.Disks {
		out = append(out, hypervisor.ExtraDisk{Name: d.Name, SizeGiB: int(d.SizeGiB), Storage: d.Storage, Bus: string(d.Bus)})
	}
	return out
}
