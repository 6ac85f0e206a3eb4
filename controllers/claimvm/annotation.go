package claimvm

import (
	"context"
	"encoding/json"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// RemoveAnnotation removes the annotation key from the MachineClaim namespace/name only while it
// still holds value, in one JSON patch that tests the value first: a cached or older read of the
// claim never removes a value someone wrote since. It reports whether it removed it; a claim that
// is gone, or whose annotation changed or went, is not an error.
func RemoveAnnotation(ctx context.Context, c client.Client, namespace, name, key, value string) (bool, error) {
	path := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
	ops, err := json.Marshal([]map[string]any{
		{"op": "test", "path": path, "value": value},
		{"op": "remove", "path": path},
	})
	if err != nil {
		return false, err
	}
	claim := &infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	err = c.Patch(ctx, claim, client.RawPatch(types.JSONPatchType, ops))
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
		return false, nil // no claim, or the annotation no longer holds value
	}
	return err == nil, err
}
