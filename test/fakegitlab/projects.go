package fakegitlab

import (
	"cmp"
	"net/http"
	"slices"
	"strings"
)

// projectOrders are the order_by values the project listings serve. GitLab also takes
// similarity (with search) and, for administrators, storage sizes; the fake refuses those
// as values it does not know. updated_at and last_activity_at are created_at in the fake,
// whose projects never change, and every project has no stars.
var projectOrders = []string{"id", "name", "path", "created_at", "updated_at", "last_activity_at", "star_count"}

// sortProjects orders projects as the listing's order_by and sort ask, GitLab's default being
// created_at desc, newest first; ties go by ID in the same direction
// (docs.gitlab.com/api/projects/#list-all-projects, docs.gitlab.com/api/groups/#list-projects).
// A value it does not know is 400 "<param> does not have a valid value".
func sortProjects(w http.ResponseWriter, r *http.Request, list []*Project) bool {
	q := r.URL.Query()
	orderBy, dir := cmp.Or(q.Get("order_by"), "created_at"), cmp.Or(q.Get("sort"), "desc")
	if !slices.Contains(projectOrders, orderBy) {
		writeBadRequest(w, "order_by does not have a valid value")
		return false
	}
	if dir != "asc" && dir != "desc" {
		writeBadRequest(w, "sort does not have a valid value")
		return false
	}
	name := func(p *Project) string { return p.PathWithNamespace[strings.LastIndex(p.PathWithNamespace, "/")+1:] }
	slices.SortFunc(list, func(a, b *Project) int {
		var c int
		switch orderBy {
		case "name", "path":
			c = strings.Compare(name(a), name(b))
		case "created_at", "updated_at", "last_activity_at":
			c = a.CreatedAt.Compare(b.CreatedAt)
		}
		c = cmp.Or(c, cmp.Compare(a.ID, b.ID))
		if dir == "desc" {
			return -c
		}
		return c
	})
	return true
}

// listGroupProjects lists a group's projects, with include_subgroups=true those of its
// subgroups too.
func (s *Server) listGroupProjects(w http.ResponseWriter, r *http.Request, _ accessToken) {
	var sub bool
	if v := r.URL.Query().Get("include_subgroups"); v != "" {
		var ok bool
		if sub, ok = grapeBool(v); !ok {
			writeBadRequest(w, "include_subgroups is invalid")
			return
		}
	}
	s.mu.Lock()
	g := s.groupLocked(r.PathValue("id"))
	if g == nil {
		s.mu.Unlock()
		writeMessage(w, http.StatusNotFound, "404 Group Not Found")
		return
	}
	var projects []*Project
	for _, p := range s.projects {
		if p.GroupID == g.ID || (sub && s.inGroupLocked(g.ID, p.GroupID)) {
			projects = append(projects, p)
		}
	}
	s.mu.Unlock()
	s.writeProjects(w, r, projects)
}

// listProjects lists every project, as an administrator sees them.
func (s *Server) listProjects(w http.ResponseWriter, r *http.Request, _ accessToken) {
	s.mu.Lock()
	projects := make([]*Project, 0, len(s.projects))
	for _, p := range s.projects {
		projects = append(projects, p)
	}
	s.mu.Unlock()
	s.writeProjects(w, r, projects)
}

// writeProjects sorts projects and writes one page of them.
func (s *Server) writeProjects(w http.ResponseWriter, r *http.Request, projects []*Project) {
	if !sortProjects(w, r, projects) {
		return
	}
	start, end, ok := s.paginate(w, r, len(projects))
	if !ok {
		return
	}
	s.mu.Lock()
	out := make([]map[string]any, 0, end-start)
	for _, p := range projects[start:end] {
		out = append(out, s.projectJSONLocked(p))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}
