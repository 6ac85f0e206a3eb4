package fakebuildkite

import (
	"net/http"
	"slices"
	"strings"
)

// The organization and pipeline reads of https://buildkite.com/docs/apis/rest-api/organizations
// and https://buildkite.com/docs/apis/rest-api/pipelines: the fake has one organization, and a
// pipeline exists from its first job (CreateJob).

func (s *Server) organizationJSON() map[string]any {
	org := s.opts.Organization
	return map[string]any{
		"id":            NewUUIDFrom("organization:" + org),
		"graphql_id":    "T3JnYW5pemF0aW9uLS0t" + org,
		"url":           s.URL() + "/v2/organizations/" + org,
		"web_url":       "https://buildkite.com/" + org,
		"name":          org,
		"slug":          org,
		"pipelines_url": s.restURL("/pipelines"),
		"agents_url":    s.restURL("/agents"),
		"emojis_url":    s.restURL("/emojis"),
		"created_at":    restTime(s.started),
	}
}

// listOrganizations lists the organizations the token may see: the fake's one.
func (s *Server) listOrganizations(w http.ResponseWriter, r *http.Request, _ caller) {
	start, end, ok := s.page(w, r, 1)
	if !ok {
		return
	}
	out := []map[string]any{s.organizationJSON()}[start:end]
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getOrganization(w http.ResponseWriter, _ *http.Request, _ caller) {
	writeJSON(w, http.StatusOK, s.organizationJSON())
}

func (s *Server) pipelineJSONLocked(p *Pipeline) map[string]any {
	return map[string]any{
		"id":             p.ID,
		"graphql_id":     "UGlwZWxpbmUtLS0" + p.ID[:8],
		"url":            s.restURL("/pipelines/%s", p.Slug),
		"web_url":        "https://buildkite.com/" + s.opts.Organization + "/" + p.Slug,
		"name":           p.Name,
		"slug":           p.Slug,
		"repository":     p.Repository,
		"builds_url":     s.restURL("/pipelines/%s/builds", p.Slug),
		"default_branch": "main",
		"cluster_id":     s.opts.ClusterID,
		"visibility":     "private",
		"provider":       map[string]any{"id": "github", "settings": map[string]any{}},
		"created_at":     restTime(p.CreatedAt),
	}
}

// listPipelines lists the organization's pipelines by name, as Buildkite orders them.
func (s *Server) listPipelines(w http.ResponseWriter, r *http.Request, _ caller) {
	s.mu.Lock()
	list := make([]*Pipeline, 0, len(s.pipelines))
	for _, p := range s.pipelines {
		list = append(list, p)
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b *Pipeline) int { return strings.Compare(a.Name, b.Name) })
	writePage(s, w, r, list, func(p **Pipeline) map[string]any { return s.pipelineJSONLocked(*p) })
}

func (s *Server) getPipeline(w http.ResponseWriter, r *http.Request, _ caller) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pipelines[r.PathValue("pipeline")]
	if p == nil {
		writeError(w, http.StatusNotFound, "No pipeline found")
		return
	}
	writeJSON(w, http.StatusOK, s.pipelineJSONLocked(p))
}
