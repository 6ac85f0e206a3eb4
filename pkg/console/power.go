package console

import (
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// errNoPowerControl: the VM's claim has no power control the console may use.
type errNoPowerControl struct{ msg string }

func (e errNoPowerControl) Error() string { return e.msg }

// powerChange is what turning a claim's VM on or off changes on the claim, the way KubeVirt's
// virtctl start and stop do: a Manual VM gets a one-off power request (the PowerRequestAnnotation),
// any other persistent VM a run strategy (Always to run, Halted to stay off). Ephemeral VMs (one CI
// job each) have no power control: they power off when their job ends and are then removed.
func powerChange(c *infrav1.MachineClaim, op string) (client.Patch, error) {
	if c.Spec.Lifecycle != infrav1.LifecyclePersistent {
		return nil, errNoPowerControl{fmt.Sprintf("MachineClaim %s/%s is not Persistent (spec.lifecycle): an ephemeral VM runs one job and is removed when it powers off", c.Namespace, c.Name)}
	}
	base := client.MergeFrom(c.DeepCopy())
	switch {
	case c.Spec.RunStrategy == infrav1.RunStrategyManual:
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[infrav1.PowerRequestAnnotation] = infrav1.PowerRequestStart
		if op == opPowerOff {
			c.Annotations[infrav1.PowerRequestAnnotation] = infrav1.PowerRequestStop
		}
	case op == opPowerOff:
		c.Spec.RunStrategy = infrav1.RunStrategyHalted
	case c.Spec.RunStrategy == infrav1.RunStrategyHalted || c.Spec.RunStrategy == infrav1.RunStrategyOnce:
		c.Spec.RunStrategy = infrav1.RunStrategyAlways
	}
	return base, nil
}

// power turns a long-lived VM on or off through its claim, so the claim, not the console, decides
// and keeps deciding.
func (s *Server) power(op string) func(w http.ResponseWriter, r *http.Request, c *caller) {
	return func(w http.ResponseWriter, r *http.Request, c *caller) {
		claim, err := s.getClaim(r, c)
		if err != nil {
			writeKubeError(w, r, err)
			return
		}
		patch, err := powerChange(claim, op)
		if err != nil {
			writeProblem(w, r, http.StatusConflict, "No power control for this VM", err.Error(), nil)
			return
		}
		c.auditDetail("%s", powerDetail(claim))
		if err := c.Client.Patch(r.Context(), claim, patch); err != nil {
			writeKubeError(w, r, err)
			return
		}
		j, _ := jobOf(op, claim.Namespace, claim.Name, claim)
		w.Header().Set("Location", "/api/v1/jobs/"+j.ID)
		writeJSON(w, http.StatusAccepted, j)
	}
}

// powerDetail says what a power change asked for, for the audit log: the run strategy, or the
// one-off power request of a Manual VM.
func powerDetail(c *infrav1.MachineClaim) string {
	if c.Spec.RunStrategy == infrav1.RunStrategyManual {
		return "power request " + c.Annotations[infrav1.PowerRequestAnnotation]
	}
	return "runStrategy " + string(c.Spec.RunStrategy)
}
