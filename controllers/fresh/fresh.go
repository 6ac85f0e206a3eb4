// Package fresh writes a status only if the object has not changed since it was read: the guard
// of steps that act on the outside world once per object.
package fresh

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PatchStatus writes obj's status changes since base with base's resourceVersion, so that a
// step decided from a stale read of obj (the cache not yet showing what an earlier reconcile
// wrote) is refused instead of acted on. It reports stale on a conflict; the caller requeues and
// decides again from a fresh read. Steps that act on the outside world once per object (holding a
// claim, recording what a VM was before it is changed) take it: with a synchronous provider the
// world has changed before the cache has.
//
// obj itself is left as it is (the server's answer goes to a copy), so changes the reconcile made
// to it since base stay for its own patch at the end. A patch of no change writes nothing and
// keeps the resourceVersion.
func PatchStatus(ctx context.Context, c client.Client, obj, base client.Object) (stale bool, err error) {
	out, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return false, fmt.Errorf("%T is not a client.Object", obj)
	}
	err = c.Status().Patch(ctx, out, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		return true, nil
	}
	return false, err
}
