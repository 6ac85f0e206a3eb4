package console

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func (s *Server) networksPage(w http.ResponseWriter, r *http.Request, c *caller) {
	networks, err := s.listNetworks(r.Context(), c.Client, "")
	if err != nil {
		s.renderKubeError(w, c, err)
		return
	}
	s.render(w, http.StatusOK, "networks", c, "Networks", "networks", networks)
}

func (s *Server) networkPage(w http.ResponseWriter, r *http.Request, c *caller) {
	d, err := getNetwork(r.Context(), c.Client, r.PathValue("namespace"), r.PathValue("name"))
	if err != nil {
		s.renderHiddenError(w, c, "VMNetwork", err)
		return
	}
	s.render(w, http.StatusOK, "network", c, "Network "+d.Namespace+"/"+d.Name, "networks", d)
}

func (s *Server) storagesPage(w http.ResponseWriter, r *http.Request, c *caller) {
	storages, err := s.listStorages(r.Context(), c.Client, "")
	if err != nil {
		s.renderKubeError(w, c, err)
		return
	}
	s.render(w, http.StatusOK, "storages", c, "Storage", "storage", storages)
}

func (s *Server) storagePage(w http.ResponseWriter, r *http.Request, c *caller) {
	d, err := getStorage(r.Context(), c.Client, r.PathValue("namespace"), r.PathValue("name"))
	if err != nil {
		s.renderHiddenError(w, c, "VMStorage", err)
		return
	}
	s.render(w, http.StatusOK, "storage", c, "Storage "+d.Namespace+"/"+d.Name, "storage", d)
}

// renderHiddenError is writeHiddenError's page: a missing object and one the caller may not read
// get the same page.
func (s *Server) renderHiddenError(w http.ResponseWriter, c *caller, kind string, err error) {
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		s.render(w, http.StatusNotFound, "error", c, "Not found", "", hiddenDetail(kind))
		return
	}
	s.renderKubeError(w, c, err)
}

// humanBytes writes a byte count in binary units, as the hypervisors show capacity.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
