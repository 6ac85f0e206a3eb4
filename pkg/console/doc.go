// Package console is HyperFleet's operator console: a REST API under /api/v1 with its OpenAPI
// document, a server-rendered web UI, and OIDC sign-in. It keeps no state of its own: everything
// it shows is read from the Kubernetes API and the hypervisors, and everything it does for a
// person goes through a Kubernetes client impersonating that person, so namespace RBAC decides.
package console
