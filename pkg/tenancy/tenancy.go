package tenancy

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// ErrNamespaceNotEnabled matches (errors.Is) every error Check returns for a refused request.
var ErrNamespaceNotEnabled = errors.New("namespace not enabled for HyperFleet")

// NotEnabledError is a Secret request the API server refused because the namespace is not enabled.
type NotEnabledError struct {
	Namespace string
	Err       error
}

func (e *NotEnabledError) Error() string {
	return fmt.Sprintf("HyperFleet is not enabled in namespace %s: an admin binds the ClusterRoles hyperfleet-tenant-manager "+
		"and hyperfleet-tenant-bootstrap there (kubectl apply -n %s -k config/tenant, or the Helm value tenantNamespaces; "+
		"see docs/install.md): %v", e.Namespace, e.Namespace, e.Err)
}

func (e *NotEnabledError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrNamespaceNotEnabled) true.
func (e *NotEnabledError) Is(target error) bool { return target == ErrNamespaceNotEnabled }

// Check turns the API server's 403 for a Secret in namespace into a NotEnabledError and returns any
// other error (or nil) unchanged.
func Check(err error, namespace string) error {
	if apierrors.IsForbidden(err) {
		return &NotEnabledError{Namespace: namespace, Err: err}
	}
	return err
}
