package fakegitlab

import (
	"net/http"
	"slices"
	"time"
)

// Values the runner listings accept (docs.gitlab.com/api/runners/#list-owned-runners). active
// and paused as statuses, and scope, are deprecated but still served.
var (
	runnerTypes    = []string{InstanceType, GroupType, ProjectType}
	runnerStatuses = []string{"active", "paused", "online", "offline", "stale", "never_contacted"}
	// runnerScopesAll is what /runners/all and the project listing also take as scope.
	runnerScopesAll = append([]string{"specific", "shared"}, append(runnerTypes, runnerStatuses...)...)
)

// runnerFilter is a runner listing's type, status, scope, paused and tag_list parameters.
type runnerFilter struct {
	typ, status, scope string
	paused             *bool
	tags               []string
}

// parseRunnerFilter reads and validates the listing's parameters; a value GitLab does not
// know is 400 "<param> does not have a valid value", a paused that is not a boolean 400
// "paused is invalid", as Grape words them.
func parseRunnerFilter(w http.ResponseWriter, r *http.Request, scopes []string) (runnerFilter, bool) {
	q := r.URL.Query()
	f := runnerFilter{typ: q.Get("type"), status: q.Get("status"), scope: q.Get("scope")}
	for _, p := range []struct {
		name, value string
		allowed     []string
	}{{"type", f.typ, runnerTypes}, {"status", f.status, runnerStatuses}, {"scope", f.scope, scopes}} {
		if p.value != "" && !slices.Contains(p.allowed, p.value) {
			writeBadRequest(w, p.name+" does not have a valid value")
			return f, false
		}
	}
	if v := q.Get("paused"); v != "" {
		b, ok := grapeBool(v)
		if !ok {
			writeBadRequest(w, "paused is invalid")
			return f, false
		}
		f.paused = &b
	}
	if v := q.Get("tag_list"); v != "" {
		f.tags = splitTags(v)
	}
	return f, true
}

// matchStatus applies a status or scope value: a type, specific (not instance), shared
// (instance), active, paused, or the runner's contact status.
func matchStatus(run *Runner, v string, now time.Time) bool {
	switch v {
	case "":
		return true
	case InstanceType, GroupType, ProjectType:
		return run.Type == v
	case "specific":
		return run.Type != InstanceType
	case "shared":
		return run.Type == InstanceType
	case "active":
		return !run.Paused
	case "paused":
		return run.Paused
	default:
		return run.Status(now) == v
	}
}

func (f runnerFilter) keepLocked(run *Runner, now time.Time) bool {
	return (f.typ == "" || run.Type == f.typ) && matchStatus(run, f.status, now) && matchStatus(run, f.scope, now) &&
		(f.paused == nil || run.Paused == *f.paused) && containsAll(run.Tags, f.tags)
}

// writeRunners filters runners with the listing's parameters, sorts them by ID and writes one
// page.
func (s *Server) writeRunners(w http.ResponseWriter, r *http.Request, f runnerFilter, keep func(*Runner) bool) {
	s.mu.Lock()
	now := s.now()
	var list []map[string]any
	ids := make([]int64, 0, len(s.runners))
	for id := range s.runners {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		if run := s.runners[id]; keep(run) && f.keepLocked(run, now) {
			list = append(list, s.runnerJSONLocked(run))
		}
	}
	s.mu.Unlock()
	start, end, ok := s.paginate(w, r, len(list))
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, nonNil(list[start:end]))
}

// listOwnedRunners is GET /runners: the runners of the groups and projects the user owns,
// which in the fake are all group and project runners; instance runners are only in
// /runners/all (docs.gitlab.com/api/runners/#list-owned-runners).
func (s *Server) listOwnedRunners(w http.ResponseWriter, r *http.Request, _ accessToken) {
	f, ok := parseRunnerFilter(w, r, runnerStatuses)
	if !ok {
		return
	}
	s.writeRunners(w, r, f, func(run *Runner) bool { return run.Type != InstanceType })
}

// listAllRunners is GET /runners/all, administrators only
// (docs.gitlab.com/api/runners/#list-all-runners).
func (s *Server) listAllRunners(w http.ResponseWriter, r *http.Request, tok accessToken) {
	f, ok := parseRunnerFilter(w, r, runnerScopesAll)
	if !ok {
		return
	}
	if !tok.admin {
		writeMessage(w, http.StatusForbidden, "403 Forbidden")
		return
	}
	s.writeRunners(w, r, f, func(*Runner) bool { return true })
}

// listGroupRunners lists the runners available to a group: its own and its ancestors' group
// runners and the instance runners.
func (s *Server) listGroupRunners(w http.ResponseWriter, r *http.Request, _ accessToken) {
	f, ok := parseRunnerFilter(w, r, nil)
	if !ok {
		return
	}
	s.mu.Lock()
	g := s.groupLocked(r.PathValue("id"))
	s.mu.Unlock()
	if g == nil {
		writeMessage(w, http.StatusNotFound, "404 Group Not Found")
		return
	}
	s.writeRunners(w, r, f, func(run *Runner) bool {
		return run.Type == InstanceType || (run.Type == GroupType && s.inGroupLocked(run.GroupID, g.ID))
	})
}

// listProjectRunners lists the runners available to a project: its own, its groups' and the
// instance runners.
func (s *Server) listProjectRunners(w http.ResponseWriter, r *http.Request, _ accessToken) {
	f, ok := parseRunnerFilter(w, r, runnerScopesAll)
	if !ok {
		return
	}
	s.mu.Lock()
	p := s.projectLocked(r.PathValue("id"))
	s.mu.Unlock()
	if p == nil {
		writeMessage(w, http.StatusNotFound, "404 Project Not Found")
		return
	}
	s.writeRunners(w, r, f, func(run *Runner) bool {
		switch run.Type {
		case InstanceType:
			return true
		case GroupType:
			return s.inGroupLocked(run.GroupID, p.GroupID)
		default:
			return run.ProjectID == p.ID
		}
	})
}
