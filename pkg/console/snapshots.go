package console

import (
	"net/http"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// Snapshot is one MachineSnapshot of a VM, as a person sees it.
type Snapshot struct {
	Namespace   string `json:"namespace"`
	VM          string `json:"vm"`
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// WithMemory was asked for; Phase and ReadyToUse are how far the hypervisor got.
	WithMemory bool   `json:"withMemory"`
	Phase      string `json:"phase,omitempty"`
	ReadyToUse bool   `json:"readyToUse"`
	// HypervisorName is the snapshot's name on the hypervisor.
	HypervisorName string    `json:"hypervisorName,omitempty"`
	Error          string    `json:"error,omitempty"`
	Deleting       bool      `json:"deleting,omitempty"`
	Created        time.Time `json:"created"`
}

// CreateSnapshotRequest asks for a snapshot of a long-lived VM.
type CreateSnapshotRequest struct {
	Name        string `json:"name"`
	WithMemory  bool   `json:"withMemory,omitempty"`
	Description string `json:"description,omitempty"`
}

func snapshotOf(s *fleetv1.MachineSnapshot) Snapshot {
	return Snapshot{Namespace: s.Namespace, VM: s.Spec.Source.MachineClaimName, Name: s.Name, Description: s.Spec.Description,
		WithMemory: s.Spec.WithMemory, Phase: string(s.Status.Phase), ReadyToUse: s.Status.ReadyToUse,
		HypervisorName: s.Status.SnapshotName, Error: s.Status.Error, Deleting: !s.DeletionTimestamp.IsZero(),
		Created: s.CreationTimestamp.Time}
}

// postSnapshot takes a snapshot of a long-lived VM: a MachineSnapshot of its claim, made as the caller.
func (s *Server) postSnapshot(w http.ResponseWriter, r *http.Request, c *caller) {
	var req CreateSnapshotRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	c.auditObject("", r.PathValue("namespace"), req.Name)
	c.auditDetail("VM %s, withMemory %t", r.PathValue("name"), req.WithMemory)
	var errs []FieldError
	if msgs := validation.IsDNS1123Label(req.Name); len(msgs) > 0 {
		errs = append(errs, FieldError{Field: "name", Message: "must be lower-case letters, digits and '-', start and end with a letter or digit, at most 63 characters"})
	}
	if len(req.Description) > 1024 {
		errs = append(errs, FieldError{Field: "description", Message: "must be at most 1024 characters"})
	}
	if len(errs) > 0 {
		writeProblem(w, r, http.StatusUnprocessableEntity, "Invalid snapshot", "the request has invalid fields", errs)
		return
	}
	claim, err := s.getClaim(r, c)
	if err != nil {
		writeKubeError(w, r, err)
		return
	}
	if claim.Spec.Lifecycle != infrav1.LifecyclePersistent {
		writeProblem(w, r, http.StatusConflict, "No snapshots for this VM",
			"MachineClaim "+claim.Namespace+"/"+claim.Name+" is not Persistent: an ephemeral VM runs one job and is removed", nil)
		return
	}
	snap := &fleetv1.MachineSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: claim.Namespace, Labels: map[string]string{CreatedByLabel: "hyperfleet-console"}},
		Spec: fleetv1.MachineSnapshotSpec{Source: fleetv1.MachineSnapshotSource{MachineClaimName: claim.Name},
			WithMemory: req.WithMemory, Description: req.Description},
	}
	if err := c.Client.Create(r.Context(), snap); err != nil {
		writeKubeError(w, r, err)
		return
	}
	w.Header().Set("Location", r.URL.Path+"/"+snap.Name)
	writeJSON(w, http.StatusAccepted, snapshotOf(snap))
}

// getSnapshots lists a VM's snapshots, oldest first.
func (s *Server) getSnapshots(w http.ResponseWriter, r *http.Request, c *caller) {
	list := &fleetv1.MachineSnapshotList{}
	if err := c.Client.List(r.Context(), list, client.InNamespace(r.PathValue("namespace"))); err != nil {
		writeKubeError(w, r, err)
		return
	}
	out := List[Snapshot]{Items: []Snapshot{}}
	for i := range list.Items {
		if list.Items[i].Spec.Source.MachineClaimName == r.PathValue("name") {
			out.Items = append(out.Items, snapshotOf(&list.Items[i]))
		}
	}
	sort.Slice(out.Items, func(i, j int) bool { return out.Items[i].Created.Before(out.Items[j].Created) })
	writeJSON(w, http.StatusOK, out)
}

// snapshotOfVM reads the named snapshot, which must be of the VM the path names.
func snapshotOfVM(r *http.Request, c *caller) (*fleetv1.MachineSnapshot, bool, error) {
	snap := &fleetv1.MachineSnapshot{}
	if err := c.Client.Get(r.Context(), client.ObjectKey{Namespace: r.PathValue("namespace"), Name: r.PathValue("snapshot")}, snap); err != nil {
		return nil, false, err
	}
	return snap, snap.Spec.Source.MachineClaimName == r.PathValue("name"), nil
}

func (s *Server) getSnapshot(w http.ResponseWriter, r *http.Request, c *caller) {
	snap, ofVM, err := snapshotOfVM(r, c)
	switch {
	case err != nil:
		writeKubeError(w, r, err)
	case !ofVM:
		writeProblem(w, r, http.StatusNotFound, "Not found", "VM "+r.PathValue("name")+" has no snapshot "+r.PathValue("snapshot"), nil)
	default:
		writeJSON(w, http.StatusOK, snapshotOf(snap))
	}
}

// deleteSnapshot removes a snapshot (and, by its deletion policy, the hypervisor's).
func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request, c *caller) {
	snap, ofVM, err := snapshotOfVM(r, c)
	switch {
	case err != nil:
		writeKubeError(w, r, err)
		return
	case !ofVM:
		writeProblem(w, r, http.StatusNotFound, "Not found", "VM "+r.PathValue("name")+" has no snapshot "+r.PathValue("snapshot"), nil)
		return
	}
	if err := c.Client.Delete(r.Context(), snap, client.Preconditions{UID: &snap.UID}); err != nil {
		writeKubeError(w, r, err)
		return
	}
	out := snapshotOf(snap)
	out.Deleting = true
	writeJSON(w, http.StatusAccepted, out)
}
