package console

import (
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// power turns a long-lived VM on or off by setting its claim's run strategy (Always or Halted),
// so the claim, not the console, decides and keeps deciding. Ephemeral VMs (one CI job each) have
// no power control: they power off when their job ends and are then deleted.
func (s *Server) power(op string) func(w http.ResponseWriter, r *http.Request, c *caller) {
	strategy := "Always"
	if op == opPowerOff {
		strategy = "Halted"
	}
	return func(w http.ResponseWriter, r *http.Request, c *caller) {
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(infrav1.GroupVersion.WithKind("MachineClaim"))
		if err := c.Client.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
			writeKubeError(w, r, err)
			return
		}
		lifecycle, _, _ := unstructured.NestedString(u.Object, "spec", "lifecycle")
		if lifecycle != "Persistent" {
			writeProblem(w, r, http.StatusConflict, "No power control for this VM",
				fmt.Sprintf("MachineClaim %s/%s is not Persistent (spec.lifecycle): an ephemeral VM runs one job and is removed when it powers off", ns, name), nil)
			return
		}
		patch := []byte(fmt.Sprintf(`{"spec":{"runStrategy":%q}}`, strategy))
		if err := c.Client.Patch(r.Context(), u, client.RawPatch("application/merge-patch+json", patch)); err != nil {
			writeKubeError(w, r, err)
			return
		}
		j := Job{ID: jobID(op, ns, name), Operation: op, Namespace: ns, Name: name, State: JobRunning}
		j.Log = "/api/v1/jobs/" + j.ID + "/log"
		w.Header().Set("Location", "/api/v1/jobs/"+j.ID)
		writeJSON(w, http.StatusAccepted, j)
	}
}
