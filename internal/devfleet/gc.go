package devfleet

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
)

// collectGarbage stands in for kube-controller-manager's garbage collector, which the local
// control plane does not run: every interval it deletes bootstrap data Secrets whose owning
// BootstrapConfig is gone. In a real cluster the collector removes them through their controller
// owner reference; without it every runner would leave its Secret behind.
func collectGarbage(ctx context.Context, c client.Client, namespace string, interval time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
		secrets := &corev1.SecretList{}
		if err := c.List(ctx, secrets, client.InNamespace(namespace)); err != nil {
			continue
		}
		for i := range secrets.Items {
			s := &secrets.Items[i]
			for _, ref := range s.OwnerReferences {
				if ref.Kind != "BootstrapConfig" || ref.Controller == nil || !*ref.Controller {
					continue
				}
				owner := &bootstrapv1.BootstrapConfig{}
				err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, owner)
				if apierrors.IsNotFound(err) || (err == nil && owner.UID != ref.UID) {
					_ = client.IgnoreNotFound(c.Delete(ctx, s, client.Preconditions{UID: &s.UID}))
				}
			}
		}
	}
}
