package console

import (
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

func (s *Server) getClaim(r *http.Request, c *caller) (*infrav1.MachineClaim, error) {
	claim := &infrav1.MachineClaim{}
	err := c.Client.Get(r.Context(), client.ObjectKey{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}, claim)
	return claim, err
}
