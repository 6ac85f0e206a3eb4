package console

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/hyperfleet-io/hyperfleet/pkg/history"
)

// auditPageData is what the Audit page shows.
type auditPageData struct {
	Namespace, Actor string
	Entries          []history.AuditEntry
	// Older continues the listing; Export is the CSV of the same filters.
	Older, Export string
	Dropped       int64
}

// auditPage shows the audit log as getAudit lists it, filtered by namespace and actor.
func (s *Server) auditPage(w http.ResponseWriter, r *http.Request, c *caller) {
	v := r.URL.Query()
	d := auditPageData{Namespace: v.Get("namespace"), Actor: v.Get("actor"), Dropped: s.audit.Dropped()}
	filters := url.Values{}
	for _, k := range []string{"namespace", "actor"} {
		if v.Get(k) != "" {
			filters.Set(k, v.Get(k))
		}
	}
	export := url.Values{"format": {"csv"}}
	for k, vals := range filters {
		export[k] = vals
	}
	d.Export = "/api/v1/audit?" + export.Encode()
	store, err := s.audit.Store()
	if err != nil {
		s.render(w, http.StatusServiceUnavailable, "error", c, errAuditUnavailable, "audit", err.Error())
		return
	}
	q, _, fields := auditQueryOf(v)
	if len(fields) > 0 {
		s.render(w, http.StatusBadRequest, "error", c, "Invalid filter", "audit", fields[0].Field+" "+fields[0].Message)
		return
	}
	namespaces, all, err := s.auditNamespaces(r.Context(), c.Client, d.Namespace)
	if err != nil {
		s.renderKubeError(w, c, err)
		return
	}
	if all || len(namespaces) > 0 {
		q.Namespaces = namespaces
		if d.Entries, err = store.Audit(r.Context(), q); err != nil {
			s.render(w, http.StatusServiceUnavailable, "error", c, errAuditUnavailable, "audit", err.Error())
			return
		}
	}
	limit := q.Limit
	if limit == 0 {
		limit = history.DefaultLimit
	}
	if n := len(d.Entries); n > 0 && n == limit {
		filters.Set("before", strconv.FormatInt(d.Entries[n-1].ID, 10))
		d.Older = "/audit?" + filters.Encode()
	}
	s.render(w, http.StatusOK, "audit", c, "Audit log", "audit", d)
}
