package builtin

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// DefaultCAValidity is how long a generated CA lives. Rotation means a new Secret; VMs live hours.
const DefaultCAValidity = 5 * 365 * 24 * time.Hour

// Keys of the CA Secret.
const (
	KeyCACert      = corev1.TLSCertKey
	KeyCAKey       = corev1.TLSPrivateKeyKey
	KeyTrustDomain = "trust-domain"
)

// LoadOrCreateCA returns the CA stored in the Secret key, creating it first if it does not exist.
// Replicas starting together race on Create; the loser reads the winner's CA, so every replica
// signs with the same key.
func LoadOrCreateCA(ctx context.Context, c client.Client, key types.NamespacedName, td spiffeid.TrustDomain) (*identity.CA, error) {
	secret := &corev1.Secret{}
	err := c.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		ca, certPEM, keyPEM, genErr := identity.NewCA(td, DefaultCAValidity)
		if genErr != nil {
			return nil, genErr
		}
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace,
				Labels: map[string]string{"app.kubernetes.io/part-of": "hyperfleet", "app.kubernetes.io/component": "bootstrap-ca"}},
			Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{KeyCACert: certPEM, KeyCAKey: keyPEM, KeyTrustDomain: []byte(td.Name())},
		}
		if err = c.Create(ctx, secret); err == nil {
			return ca, nil
		}
		if apierrors.IsForbidden(err) {
			// The manager may only read the CA; the bootstrap service creates it.
			return nil, fmt.Errorf("CA Secret %s does not exist yet and only the bootstrap service may create it "+
				"(it does on its first start): %w", key, err)
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating CA Secret %s: %w", key, err)
		}
		err = c.Get(ctx, key, secret)
	}
	if err != nil {
		return nil, fmt.Errorf("reading CA Secret %s: %w", key, err)
	}
	if stored := string(secret.Data[KeyTrustDomain]); stored != "" && stored != td.Name() {
		return nil, fmt.Errorf("CA Secret %s is for trust domain %q, not %q", key, stored, td.Name())
	}
	ca, err := identity.LoadCA(td, secret.Data[KeyCACert], secret.Data[KeyCAKey])
	if err != nil {
		return nil, fmt.Errorf("CA Secret %s: %w", key, err)
	}
	return ca, nil
}
