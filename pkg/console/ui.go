package console

import (
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

//go:embed web/templates/*.html
var templateFS embed.FS

//go:embed web/static
var staticFS embed.FS

// pages are the UI's templates, each parsed with the layout.
var pages = func() map[string]*template.Template {
	funcs := template.FuncMap{
		"lower": strings.ToLower,
		"ago": func(t time.Time) string {
			if t.IsZero() {
				return ""
			}
			return shortDuration(time.Since(t))
		},
		"join": strings.Join,
		"seconds": func(s *int64) string {
			if s == nil {
				return "—"
			}
			return shortDuration(time.Duration(*s) * time.Second)
		},
		"list":  func(v ...string) []string { return v },
		"bytes": humanBytes,
		"plus":  func(a, b int64) int64 { return a + b },
		"inc":   func(i int) int { return i + 1 },
		"jobID": jobID,
		"fieldError": func(errs []FieldError, field string) string {
			for _, e := range errs {
				if e.Field == field {
					return e.Message
				}
			}
			return ""
		},
	}
	out := map[string]*template.Template{}
	names, _ := fs.Glob(templateFS, "web/templates/*.html")
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "web/templates/"), ".html")
		if base == "layout" {
			continue
		}
		out[base] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "web/templates/layout.html", n))
	}
	return out
}()

func shortDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

// page is what every template gets.
type page struct {
	Title     string
	Nav       string
	Principal Principal
	CSRF      string
	Data      any
	Error     string
}

func (s *Server) render(w http.ResponseWriter, status int, name string, c *caller, title, nav string, data any) {
	p := page{Title: title, Nav: nav, Data: data}
	if c != nil {
		p.Principal = c.Principal
		if c.Session != nil {
			p.CSRF = c.Session.CSRF
		}
	}
	if msg, ok := data.(string); ok && name == "error" {
		noteFailure(w, msg)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := pages[name].Execute(w, p); err != nil {
		s.log.Error(err, "rendering page", "page", name)
	}
}

// ui wraps a page: a browser without a session is sent to sign in; changes need the session's CSRF
// token and a role that may change things.
func (s *Server) ui(change bool, h func(w http.ResponseWriter, r *http.Request, c *caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, status, err := s.callerOf(r, change)
		if err != nil {
			if status == http.StatusUnauthorized && r.Method == http.MethodGet {
				http.Redirect(w, r, "/oidc/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusFound)
				return
			}
			s.render(w, status, "error", nil, http.StatusText(status), "", err.Error())
			return
		}
		h(w, r, c)
	}
}

func (s *Server) registerUI() {
	static, _ := fs.Sub(staticFS, "web/static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", s.ui(false, s.inventoryPage))
	s.mux.HandleFunc("GET /pools", s.ui(false, s.poolsPage))
	s.mux.HandleFunc("POST /pools/{namespace}/{name}/scale", s.uiChange(auditSpec{"scale", KindRunnerPool}, s.scalePoolForm))
	s.mux.HandleFunc("GET /vms/new", s.ui(false, s.newVMPage))
	s.mux.HandleFunc("POST /vms/new", s.uiChange(auditSpec{"create", kindMachineClaim}, s.createVMForm))
	s.mux.HandleFunc("GET /vms/{namespace}/{name}/delete", s.ui(false, s.deleteVMPage))
	s.mux.HandleFunc("POST /vms/{namespace}/{name}/delete", s.uiChange(auditSpec{"delete", kindMachineClaim}, s.deleteVMForm))
	s.mux.HandleFunc("POST /vms/{namespace}/{name}/power-on", s.uiChange(auditSpec{opPowerOn, kindMachineClaim}, s.powerForm(opPowerOn)))
	s.mux.HandleFunc("POST /vms/{namespace}/{name}/power-off", s.uiChange(auditSpec{opPowerOff, kindMachineClaim}, s.powerForm(opPowerOff)))
	s.mux.HandleFunc("GET /audit", s.ui(false, s.auditPage))
	s.mux.HandleFunc("GET /networks", s.ui(false, s.networksPage))
	s.mux.HandleFunc("GET /networks/{namespace}/{name}", s.ui(false, s.networkPage))
	s.mux.HandleFunc("GET /storage", s.ui(false, s.storagesPage))
	s.mux.HandleFunc("GET /storage/{namespace}/{name}", s.ui(false, s.storagePage))
	s.mux.HandleFunc("GET /jobs", s.ui(false, s.jobsPage))
	s.mux.HandleFunc("GET /jobs/{id}", s.ui(false, s.jobPage))
	s.mux.HandleFunc("GET /history", s.ui(false, s.historyPage))
	s.mux.HandleFunc("GET /history/stats", s.ui(false, s.historyStatsPage))
	s.mux.HandleFunc("GET /history/jobs/{platform}/{id}", s.ui(false, s.historyJobPage))
	s.mux.HandleFunc("GET /signed-out", func(w http.ResponseWriter, _ *http.Request) {
		s.render(w, http.StatusOK, "signedout", nil, "Signed out", "", nil)
	})
}

type inventoryData struct {
	Clusters []Cluster
	Hosts    []Host
	VMs      []VM
	Filter   VMFilter
}

func (s *Server) inventoryPage(w http.ResponseWriter, r *http.Request, c *caller) {
	q := r.URL.Query()
	f, err := vmFilterOf(q)
	if err != nil {
		s.render(w, http.StatusBadRequest, "error", c, "Invalid filter", "", "poolKind "+err.Error())
		return
	}
	hosts, clusters, err := s.listHosts(r.Context(), c.Client, f.Namespace)
	if err != nil {
		s.renderKubeError(w, c, err)
		return
	}
	vms, err := s.listVMs(r.Context(), c.Client, f)
	if err != nil {
		s.renderKubeError(w, c, err)
		return
	}
	s.render(w, http.StatusOK, "inventory", c, "Inventory", "inventory", inventoryData{Clusters: clusters, Hosts: hosts, VMs: vms, Filter: f})
}

func (s *Server) renderKubeError(w http.ResponseWriter, c *caller, err error) {
	rec := &problemRecorder{}
	writeKubeError(rec, nil, err)
	s.render(w, rec.status, "error", c, http.StatusText(rec.status), "", err.Error())
}

// problemRecorder captures only the status writeKubeError chooses.
type problemRecorder struct {
	status int
	h      http.Header
}

func (p *problemRecorder) Header() http.Header {
	if p.h == nil {
		p.h = http.Header{}
	}
	return p.h
}
func (p *problemRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (p *problemRecorder) WriteHeader(status int)      { p.status = status }

type poolsData struct {
	// Pools are the RunnerPools, VMPools the VMPools.
	Pools   []Pool
	VMPools []Pool
}

func (s *Server) poolsPage(w http.ResponseWriter, r *http.Request, c *caller) {
	pools, err := s.listPools(r.Context(), c.Client, "", "")
	if err != nil {
		s.renderKubeError(w, c, err)
		return
	}
	d := poolsData{}
	for _, p := range pools {
		if p.Kind == KindVMPool {
			d.VMPools = append(d.VMPools, p)
		} else {
			d.Pools = append(d.Pools, p)
		}
	}
	s.render(w, http.StatusOK, "pools", c, "Pools", "pools", d)
}

// scalePoolForm scales a pool of the form's kind (RunnerPool when absent).
func (s *Server) scalePoolForm(w http.ResponseWriter, r *http.Request, c *caller) {
	kind, err := parsePoolKind(r.PostFormValue("kind"), KindRunnerPool)
	if err != nil {
		s.render(w, http.StatusBadRequest, "error", c, "Invalid kind", "", "kind "+err.Error())
		return
	}
	n, err := strconv.ParseInt(r.PostFormValue("replicas"), 10, 32)
	pool := kind + " " + r.PathValue("namespace") + "/" + r.PathValue("name")
	c.auditObject(kind, r.PathValue("namespace"), r.PathValue("name"))
	c.auditDetail("replicas %s", r.PostFormValue("replicas"))
	if err != nil {
		s.render(w, http.StatusUnprocessableEntity, "error", c, "Invalid scale", "", "replicas must be a whole number")
		return
	}
	_, fe, err := scalePoolAs(r.Context(), c.Client, kind, r.PathValue("namespace"), r.PathValue("name"), ScaleRequest{Replicas: ptrInt32(int32(n))})
	switch {
	case err != nil:
		s.renderKubeError(w, c, err)
	case fe != nil:
		s.render(w, http.StatusUnprocessableEntity, "error", c, "Invalid scale", "", pool+": "+fe.Field+" "+fe.Message)
	default:
		http.Redirect(w, r, "/pools", http.StatusSeeOther)
	}
}

type vmFormData struct {
	Request  CreateVMRequest
	Errors   []FieldError
	Clusters []Cluster
}

func (s *Server) newVMPage(w http.ResponseWriter, r *http.Request, c *caller) {
	_, clusters, err := s.listHosts(r.Context(), c.Client, "")
	if err != nil {
		s.renderKubeError(w, c, err)
		return
	}
	req := CreateVMRequest{CPUs: 2, MemoryMiB: 2048}
	if len(clusters) > 0 {
		req.Namespace, req.Cluster = clusters[0].Namespace, clusters[0].Name
	}
	s.render(w, http.StatusOK, "vmnew", c, "Create a VM", "vmnew", vmFormData{Request: req, Clusters: clusters})
}

// formInt reads an optional number field; a bad one is a field error.
func formInt(r *http.Request, field string, errs *[]FieldError) int32 {
	v := strings.TrimSpace(r.PostFormValue(field))
	if v == "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		*errs = append(*errs, FieldError{Field: field, Message: "must be a whole number"})
		return 0
	}
	return int32(n)
}

func (s *Server) createVMForm(w http.ResponseWriter, r *http.Request, c *caller) {
	var errs []FieldError
	cluster := r.PostFormValue("cluster")
	ns, name, _ := strings.Cut(cluster, "/")
	req := CreateVMRequest{Namespace: ns, Cluster: name, Name: strings.TrimSpace(r.PostFormValue("name")),
		Host: strings.TrimSpace(r.PostFormValue("host")), Template: strings.TrimSpace(r.PostFormValue("template")),
		CPUs: formInt(r, "cpus", &errs), MemoryMiB: formInt(r, "memoryMiB", &errs), DiskGiB: formInt(r, "diskGiB", &errs),
		Bridge: strings.TrimSpace(r.PostFormValue("bridge")), VLAN: formInt(r, "vlan", &errs),
		UserData: strings.ReplaceAll(r.PostFormValue("userData"), "\r\n", "\n")}
	c.auditObject("", req.Namespace, req.Name)
	c.auditDetail("%s", req.auditDetail())
	errs = append(errs, req.Validate()...)
	rerender := func(status int, errs []FieldError, msg string) {
		_, clusters, _ := s.listHosts(r.Context(), c.Client, "")
		p := vmFormData{Request: req, Errors: errs, Clusters: clusters}
		s.renderWithError(w, status, "vmnew", c, "Create a VM", "vmnew", p, msg)
	}
	if len(errs) > 0 {
		rerender(http.StatusUnprocessableEntity, errs, "Please correct the fields marked below.")
		return
	}
	claim, err := createVM(r.Context(), c.Client, req)
	if err != nil {
		rec := &problemRecorder{}
		writeKubeError(rec, nil, err)
		rerender(rec.status, nil, err.Error())
		return
	}
	http.Redirect(w, r, "/jobs/"+url.PathEscape(jobID(opCreate, claim.Namespace, claim.Name)), http.StatusSeeOther)
}

func (s *Server) renderWithError(w http.ResponseWriter, status int, name string, c *caller, title, nav string, data any, msg string) {
	noteFailure(w, msg)
	p := page{Title: title, Nav: nav, Data: data, Error: msg, Principal: c.Principal}
	if c.Session != nil {
		p.CSRF = c.Session.CSRF
	}
	if msg, ok := data.(string); ok && name == "error" {
		noteFailure(w, msg)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := pages[name].Execute(w, p); err != nil {
		s.log.Error(err, "rendering page", "page", name)
	}
}

func (s *Server) deleteVMPage(w http.ResponseWriter, r *http.Request, c *caller) {
	claim, err := s.getClaim(r, c)
	if err != nil {
		s.renderKubeError(w, c, err)
		return
	}
	s.render(w, http.StatusOK, "vmdelete", c, "Delete VM "+claim.Name, "inventory", s.vmOf(claim))
}

func (s *Server) deleteVMForm(w http.ResponseWriter, r *http.Request, c *caller) {
	j, err := deleteClaim(r, c.Client, r.PathValue("namespace"), r.PathValue("name"))
	if errors.Is(err, errRunnerVM) {
		s.render(w, http.StatusConflict, "error", c, "VM belongs to a pool", "", err.Error())
		return
	}
	if err != nil {
		s.renderKubeError(w, c, err)
		return
	}
	http.Redirect(w, r, "/jobs/"+url.PathEscape(j.ID), http.StatusSeeOther)
}

func (s *Server) powerForm(op string) func(w http.ResponseWriter, r *http.Request, c *caller) {
	return func(w http.ResponseWriter, r *http.Request, c *caller) {
		claim, err := s.getClaim(r, c)
		if err != nil {
			s.renderKubeError(w, c, err)
			return
		}
		patch, err := powerChange(claim, op)
		if err != nil {
			s.render(w, http.StatusConflict, "error", c, "No power control for this VM", "", err.Error())
			return
		}
		c.auditDetail("%s", powerDetail(claim))
		if err := c.Client.Patch(r.Context(), claim, patch); err != nil {
			s.renderKubeError(w, c, err)
			return
		}
		http.Redirect(w, r, "/jobs/"+url.PathEscape(jobID(op, claim.Namespace, claim.Name)), http.StatusSeeOther)
	}
}

func (s *Server) jobsPage(w http.ResponseWriter, r *http.Request, c *caller) {
	jobs, err := s.listJobs(r.Context(), c.Client, "")
	if err != nil {
		s.renderKubeError(w, c, err)
		return
	}
	s.render(w, http.StatusOK, "jobs", c, "Jobs", "jobs", jobs)
}

type jobData struct {
	Job Job
	VM  *VM
}

func (s *Server) jobPage(w http.ResponseWriter, r *http.Request, c *caller) {
	j, claim, err := getJob(r.Context(), c.Client, r.PathValue("id"))
	switch {
	case errors.Is(err, errNoSuchJob):
		s.render(w, http.StatusNotFound, "error", c, "No such job", "", err.Error())
		return
	case errors.Is(err, errBadJobID):
		s.render(w, http.StatusBadRequest, "error", c, "Invalid job ID", "", err.Error())
		return
	case err != nil:
		s.renderKubeError(w, c, err)
		return
	}
	d := jobData{Job: j}
	if claim != nil {
		vm := s.vmOf(claim)
		d.VM = &vm
	}
	s.render(w, http.StatusOK, "job", c, "Job "+j.Operation+" "+j.Namespace+"/"+j.Name, "jobs", d)
}

func ptrInt32(v int32) *int32 { return &v }
