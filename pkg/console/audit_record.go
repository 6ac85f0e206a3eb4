package console

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/history"
)

// Kinds of the objects the console changes, as its audit entries name them.
const (
	kindMachineClaim    = "MachineClaim"
	kindMachineSnapshot = "MachineSnapshot"
)

// apiVersionOf is the API version of each kind the console changes.
var apiVersionOf = map[string]string{
	kindMachineClaim:    infrav1.GroupVersion.String(),
	kindMachineSnapshot: fleetv1.GroupVersion.String(),
	KindRunnerPool:      fleetv1.GroupVersion.String(),
	KindVMPool:          fleetv1.GroupVersion.String(),
}

// maxAuditResult bounds the Result of an entry: the refusal a person got, not a novel.
const maxAuditResult = 1024

// auditSpec says what a change route does, for its audit entry: an action on a kind of object,
// named by the path's namespace and name unless the handler names it (auditObject).
type auditSpec struct {
	Action string
	Kind   string
}

// auditNote is what a handler adds to its route's audit entry.
type auditNote struct {
	object history.ObjectRef
	detail string
}

// auditObject names the object the request acts on when the path does not (a body names it); an
// empty kind keeps the route's.
func (c *caller) auditObject(kind, namespace, name string) {
	if c.note == nil {
		return
	}
	if kind != "" {
		c.note.object.Kind = kind
	}
	c.note.object.Namespace, c.note.object.Name = namespace, name
}

// auditDetail says, in a few words, what was asked for: a power state, a replica count. Never a
// secret nor user-data.
func (c *caller) auditDetail(format string, args ...any) {
	if c.note != nil {
		c.note.detail = fmt.Sprintf(format, args...)
	}
}

// auditWriter remembers the status a change was answered with and why it failed.
type auditWriter struct {
	http.ResponseWriter
	status  int
	failure string
}

func (w *auditWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *auditWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *auditWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// noteFailure keeps the first error message a change is answered with, for its audit entry.
func noteFailure(w http.ResponseWriter, msg string) {
	if aw, ok := w.(*auditWriter); ok && aw.failure == "" {
		aw.failure = msg
	}
}

// result is the entry's Result: ok, or the status and the message the person got.
func (w *auditWriter) result() string {
	if w.status == 0 || w.status < http.StatusBadRequest {
		return history.ResultOK
	}
	out := strconv.Itoa(w.status) + " " + http.StatusText(w.status)
	if w.failure != "" {
		out += ": " + w.failure
	}
	if len(out) > maxAuditResult {
		out = out[:maxAuditResult]
	}
	return out
}

// audited serves a change as p and queues its audit entry once it is answered, whatever the answer.
func (s *Server) audited(spec auditSpec, w http.ResponseWriter, r *http.Request, p Principal, serve func(w http.ResponseWriter, note *auditNote)) {
	note := &auditNote{object: history.ObjectRef{Kind: spec.Kind, Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}}
	if spec.Kind == kindMachineSnapshot {
		note.object.Name = r.PathValue("snapshot")
		note.detail = "VM " + r.PathValue("name")
	}
	aw := &auditWriter{ResponseWriter: w}
	serve(aw, note)
	note.object.APIVersion = apiVersionOf[note.object.Kind]
	s.audit.record(history.AuditEntry{
		Time:   time.Now(),
		Actor:  history.Actor{Subject: p.User, Groups: p.Groups, Kind: history.ActorPerson},
		Action: spec.Action,
		Object: note.object,
		Result: aw.result(),
		Detail: note.detail,
	})
}

// uiChange wraps a form that changes something: as ui(true, h), and recorded in the audit log as
// spec says, refusals included.
func (s *Server) uiChange(spec auditSpec, h func(w http.ResponseWriter, r *http.Request, c *caller)) http.HandlerFunc {
	serve := s.ui(true, h)
	return func(w http.ResponseWriter, r *http.Request) {
		c, status, err := s.callerOf(r, true)
		if c == nil {
			serve(w, r)
			return
		}
		s.audited(spec, w, r, c.Principal, func(w http.ResponseWriter, note *auditNote) {
			if err != nil {
				s.render(w, status, "error", nil, http.StatusText(status), "", err.Error())
				return
			}
			c.note = note
			h(w, r, c)
		})
	}
}

// auditDetail is what a create asked for, in a few words: never its user-data.
func (req CreateVMRequest) auditDetail() string {
	d := "cluster " + req.Cluster + ", template " + req.Template
	if req.Host != "" {
		d += ", host " + req.Host
	}
	if req.CPUs > 0 {
		d += fmt.Sprintf(", %d CPUs", req.CPUs)
	}
	if req.MemoryMiB > 0 {
		d += fmt.Sprintf(", %d MiB", req.MemoryMiB)
	}
	if req.DiskGiB > 0 {
		d += fmt.Sprintf(", %d GiB disk", req.DiskGiB)
	}
	if req.RunStrategy != "" {
		d += ", runStrategy " + req.RunStrategy
	}
	return d
}
