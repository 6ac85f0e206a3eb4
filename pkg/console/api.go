package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// maxBody bounds a request body (user-data is at most 64 KiB).
const maxBody = 256 << 10

func (s *Server) apiRoutes() []route {
	return []route{
		{Method: "GET", Path: "/api/v1/me", Handler: s.getMe},
		{Method: "GET", Path: "/api/v1/hosts", Handler: s.getHosts},
		{Method: "GET", Path: "/api/v1/clusters", Handler: s.getClusters},
		{Method: "GET", Path: "/api/v1/vms", Handler: s.getVMs},
		{Method: "POST", Path: "/api/v1/vms", Change: true, Audit: auditSpec{opCreate, kindMachineClaim}, Handler: s.postVM},
		{Method: "POST", Path: "/api/v1/vms/create", Change: true, Audit: auditSpec{opCreate, kindMachineClaim}, Handler: s.postVM},
		{Method: "POST", Path: "/api/v1/vms/delete", Change: true, Audit: auditSpec{opDelete, kindMachineClaim}, Handler: s.postDeleteVM},
		{Method: "GET", Path: "/api/v1/vms/{namespace}/{name}", Handler: s.getVM},
		{Method: "DELETE", Path: "/api/v1/vms/{namespace}/{name}", Change: true, Audit: auditSpec{opDelete, kindMachineClaim}, Handler: s.deleteVM},
		{Method: "POST", Path: "/api/v1/vms/{namespace}/{name}/power-on", Change: true, Audit: auditSpec{opPowerOn, kindMachineClaim}, Handler: s.power(opPowerOn)},
		{Method: "POST", Path: "/api/v1/vms/{namespace}/{name}/power-off", Change: true, Audit: auditSpec{opPowerOff, kindMachineClaim}, Handler: s.power(opPowerOff)},
		{Method: "GET", Path: "/api/v1/vms/{namespace}/{name}/snapshots", Handler: s.getSnapshots},
		{Method: "POST", Path: "/api/v1/vms/{namespace}/{name}/snapshots", Change: true, Audit: auditSpec{opCreate, kindMachineSnapshot}, Handler: s.postSnapshot},
		{Method: "GET", Path: "/api/v1/vms/{namespace}/{name}/snapshots/{snapshot}", Handler: s.getSnapshot},
		{Method: "DELETE", Path: "/api/v1/vms/{namespace}/{name}/snapshots/{snapshot}", Change: true, Audit: auditSpec{opDelete, kindMachineSnapshot}, Handler: s.deleteSnapshot},
		{Method: "GET", Path: "/api/v1/jobs", Handler: s.getJobs},
		{Method: "GET", Path: "/api/v1/jobs/{id}", Handler: s.getJob},
		{Method: "GET", Path: "/api/v1/jobs/{id}/log", Handler: s.getJobLog},
		{Method: "GET", Path: "/api/v1/pools", Handler: s.getPools},
		{Method: "PATCH", Path: "/api/v1/pools/{namespace}/{name}", Change: true, Audit: auditSpec{"scale", KindRunnerPool}, Handler: s.patchPool},
		{Method: "GET", Path: "/api/v1/audit", Handler: s.getAudit},
		{Method: "GET", Path: "/api/v1/networks", Handler: s.getNetworks},
		{Method: "GET", Path: "/api/v1/namespaces/{namespace}/networks/{name}", Handler: s.getNetworkDetail},
		{Method: "GET", Path: "/api/v1/storages", Handler: s.getStorages},
		{Method: "GET", Path: "/api/v1/namespaces/{namespace}/storages/{name}", Handler: s.getStorageDetail},
	}
}

// List is the envelope of every listing.
type List[T any] struct {
	Items []T `json:"items"`
}

func (s *Server) getMe(w http.ResponseWriter, _ *http.Request, c *caller) {
	writeJSON(w, http.StatusOK, c.Principal)
}

func (s *Server) getHosts(w http.ResponseWriter, r *http.Request, c *caller) {
	hosts, _, err := s.listHosts(r.Context(), c.Client, r.URL.Query().Get("namespace"))
	if err != nil {
		writeKubeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, List[Host]{Items: hosts})
}

// getClusters lists the HypervisorClusters the caller may read, with their health.
func (s *Server) getClusters(w http.ResponseWriter, r *http.Request, c *caller) {
	_, clusters, err := s.listHosts(r.Context(), c.Client, r.URL.Query().Get("namespace"))
	if err != nil {
		writeKubeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, List[Cluster]{Items: nonNilSlice(clusters)})
}

func (s *Server) getVMs(w http.ResponseWriter, r *http.Request, c *caller) {
	f, err := vmFilterOf(r.URL.Query())
	if err != nil {
		writeProblem(w, r, http.StatusBadRequest, "Invalid filter", "poolKind "+err.Error(), []FieldError{{Field: "poolKind", Message: err.Error()}})
		return
	}
	vms, err := s.listVMs(r.Context(), c.Client, f)
	if err != nil {
		writeKubeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, List[VM]{Items: nonNilSlice(vms)})
}

func (s *Server) getVM(w http.ResponseWriter, r *http.Request, c *caller) {
	claim := &infrav1.MachineClaim{}
	if err := c.Client.Get(r.Context(), client.ObjectKey{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}, claim); err != nil {
		writeKubeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, s.vmOf(claim))
}

// decodeJSON reads a JSON body strictly: unknown fields are refused, naming them.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" && mt != "application/merge-patch+json" {
		writeProblem(w, r, http.StatusUnsupportedMediaType, "Unsupported media type", "send application/json", nil)
		return false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var fields []FieldError
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			fields = []FieldError{{Field: typeErr.Field, Message: "must be a " + typeErr.Type.String()}}
		} else if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			fields = []FieldError{{Field: strings.Trim(f, `"`), Message: "is not a known field"}}
		}
		writeProblem(w, r, http.StatusBadRequest, "Malformed request", err.Error(), fields)
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeProblem(w, r, http.StatusBadRequest, "Malformed request", "the body holds more than one JSON value", nil)
		return false
	}
	return true
}

func (s *Server) postVM(w http.ResponseWriter, r *http.Request, c *caller) {
	var req CreateVMRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	c.auditObject("", req.Namespace, req.Name)
	c.auditDetail("%s", req.auditDetail())
	if errs := req.Validate(); len(errs) > 0 {
		writeProblem(w, r, http.StatusUnprocessableEntity, "Invalid VM", "the request has invalid fields", errs)
		return
	}
	claim, err := createVM(r.Context(), c.Client, req)
	if err != nil {
		writeKubeError(w, r, err)
		return
	}
	j, _ := jobOf(opCreate, claim.Namespace, claim.Name, claim)
	w.Header().Set("Location", "/api/v1/jobs/"+j.ID)
	writeJSON(w, http.StatusAccepted, j)
}

// VMRef names a VM in a request body.
type VMRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

func (s *Server) postDeleteVM(w http.ResponseWriter, r *http.Request, c *caller) {
	var ref VMRef
	if !decodeJSON(w, r, &ref) {
		return
	}
	c.auditObject("", ref.Namespace, ref.Name)
	var errs []FieldError
	if ref.Namespace == "" {
		errs = append(errs, FieldError{Field: "namespace", Message: "is required"})
	}
	if ref.Name == "" {
		errs = append(errs, FieldError{Field: "name", Message: "is required"})
	}
	if len(errs) > 0 {
		writeProblem(w, r, http.StatusUnprocessableEntity, "Invalid request", "the request has invalid fields", errs)
		return
	}
	s.deleteVMNamed(w, r, c, ref.Namespace, ref.Name)
}

func (s *Server) deleteVM(w http.ResponseWriter, r *http.Request, c *caller) {
	s.deleteVMNamed(w, r, c, r.PathValue("namespace"), r.PathValue("name"))
}

// errRunnerVM: a pool's runner VM is replaced by its pool, never deleted behind its back.
var errRunnerVM = errors.New("this VM is a runner of a pool")

// deleteClaim deletes a VM's claim as the caller and returns its delete job.
func deleteClaim(r *http.Request, c client.Client, namespace, name string) (Job, error) {
	claim := &infrav1.MachineClaim{}
	if err := c.Get(r.Context(), client.ObjectKey{Namespace: namespace, Name: name}, claim); err != nil {
		return Job{}, err
	}
	for _, o := range claim.OwnerReferences {
		if o.Kind == "Machine" {
			return Job{}, fmt.Errorf("%w (Machine %s): scale the pool instead", errRunnerVM, o.Name)
		}
	}
	if err := c.Delete(r.Context(), claim, client.Preconditions{UID: &claim.UID}); client.IgnoreNotFound(err) != nil {
		return Job{}, err
	}
	j := Job{ID: jobID(opDelete, namespace, name), Operation: opDelete, Namespace: namespace, Name: name, State: JobRunning}
	j.Log = "/api/v1/jobs/" + j.ID + "/log"
	return j, nil
}

func (s *Server) deleteVMNamed(w http.ResponseWriter, r *http.Request, c *caller, namespace, name string) {
	j, err := deleteClaim(r, c.Client, namespace, name)
	if errors.Is(err, errRunnerVM) {
		writeProblem(w, r, http.StatusConflict, "VM belongs to a pool", err.Error(), nil)
		return
	}
	if err != nil {
		writeKubeError(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/jobs/"+j.ID)
	writeJSON(w, http.StatusAccepted, j)
}

func (s *Server) getJobs(w http.ResponseWriter, r *http.Request, c *caller) {
	jobs, err := s.listJobs(r.Context(), c.Client, r.URL.Query().Get("namespace"))
	if err != nil {
		writeKubeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, List[Job]{Items: nonNilSlice(jobs)})
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request, c *caller) {
	j, _, err := getJob(r.Context(), c.Client, r.PathValue("id"))
	if !s.jobError(w, r, err) {
		return
	}
	writeJSON(w, http.StatusOK, j)
}

// jobError answers a failed job lookup; it returns true when there was none.
func (s *Server) jobError(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, errNoSuchJob):
		writeProblem(w, r, http.StatusNotFound, "Not found", err.Error(), nil)
	case errors.Is(err, errBadJobID):
		writeProblem(w, r, http.StatusBadRequest, "Invalid job ID", err.Error(), []FieldError{{Field: "id", Message: err.Error()}})
	default:
		writeKubeError(w, r, err)
	}
	return false
}

func nonNilSlice[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
