package custody

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
)

// Rotating the signing key is a person's decision; HyperFleet never does it on its own:
//
//  1. Keep a copy of the ConfigMap's public.pem with the verifiers' other trusted keys.
//  2. Empty the Secret (the installs ship it empty, and the manager may only fill that one
//     Secret, never create Secrets in its namespace):
//     kubectl -n hyperfleet-system delete secret hyperfleet-provenance-key
//     kubectl -n hyperfleet-system create secret generic hyperfleet-provenance-key
//  3. Restart the manager: EnsureKey finds the empty Secret, writes a new key into it, publishes it as public.pem
//     and moves the old public key to previous-<first 16 hex digits of its keyid>.pem, so records
//     signed before the rotation still verify against the ConfigMap.
//  4. Give verifiers the new public.pem; for old records they add the previous key with a second
//     --key.
//
// A key that leaked is retired by also deleting its previous-*.pem entry: records it signed no
// longer verify against the ConfigMap, which is the point. To bring one's own key, create the
// Secret before the manager's first start with PrivateKeyField holding a PKCS#8 Ed25519 or
// ECDSA P-256 key.

const (
	// SecretName is the Secret holding the installation's private signing key.
	SecretName = "hyperfleet-provenance-key"
	// ConfigMapName is the ConfigMap publishing the installation's public keys.
	ConfigMapName = "hyperfleet-provenance-public-key"
	// PrivateKeyField is the Secret's key holding the PKCS#8 PEM private key.
	PrivateKeyField = "private.pem"
	// PublicKeyField is the ConfigMap's key holding the current PKIX PEM public key.
	PublicKeyField = "public.pem"
	// KeyIDField is the ConfigMap's key holding the current key's keyid.
	KeyIDField = "keyid"
	// PreviousKeyPrefix starts the ConfigMap's keys holding previous public keys, which end in
	// ".pem".
	PreviousKeyPrefix = "previous-"
)

// ErrKeySecretInvalid: the Secret of SecretName exists but does not hold a usable key. HyperFleet
// leaves it alone rather than replace someone's key.
var ErrKeySecretInvalid = errors.New("provenance key Secret is not usable")

var labels = map[string]string{"app.kubernetes.io/part-of": "hyperfleet", "app.kubernetes.io/component": "provenance"}

// EnsureKey returns the installation's signer, creating its key the first time, and publishes the
// public key. Replicas starting together race on Create; the loser reads the winner's key, so all
// sign with one key.
func EnsureKey(ctx context.Context, c client.Client, namespace string) (provenance.Signer, error) {
	signer, err := loadOrCreateKey(ctx, c, namespace)
	if err != nil {
		return provenance.Signer{}, err
	}
	if err := publish(ctx, c, namespace, signer); err != nil {
		return provenance.Signer{}, err
	}
	return signer, nil
}

func loadOrCreateKey(ctx context.Context, c client.Client, namespace string) (provenance.Signer, error) {
	key := client.ObjectKey{Namespace: namespace, Name: SecretName}
	secret := &corev1.Secret{}
	err := c.Get(ctx, key, secret)
	for attempt := 0; err == nil && len(secret.Data) == 0 && attempt < 3; attempt++ {
		// The install's empty placeholder: the manager may update this one Secret by name, never
		// create Secrets in its namespace (it could otherwise forge the identity CA's).
		var signer provenance.Signer
		signer, err = fillPlaceholder(ctx, c, secret)
		if err == nil {
			ctrl.LoggerFrom(ctx).Info("Wrote the provenance signing key into the install's empty Secret", "secret", key, "keyid", signer.KeyID())
			return signer, nil
		}
		if !apierrors.IsConflict(err) {
			return provenance.Signer{}, fmt.Errorf("writing the key into Secret %s: %w", key, err)
		}
		secret = &corev1.Secret{} // another replica filled it: read its key
		err = c.Get(ctx, key, secret)
	}
	if apierrors.IsNotFound(err) {
		priv, genErr := provenance.GenerateKey()
		if genErr != nil {
			return provenance.Signer{}, genErr
		}
		privPEM, genErr := provenance.MarshalPrivateKeyPEM(priv)
		if genErr != nil {
			return provenance.Signer{}, genErr
		}
		immutable := true
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: SecretName, Namespace: namespace, Labels: labels},
			Type:       corev1.SecretTypeOpaque,
			Immutable:  &immutable,
			Data:       map[string][]byte{PrivateKeyField: privPEM},
		}
		if err = c.Create(ctx, secret); err == nil {
			signer, err := provenance.NewSigner(priv)
			if err == nil {
				ctrl.LoggerFrom(ctx).Info("Created the provenance signing key", "secret", key, "keyid", signer.KeyID())
			}
			return signer, err
		}
		if apierrors.IsForbidden(err) {
			return provenance.Signer{}, fmt.Errorf("creating Secret %s: %w; the install ships it empty for the manager to fill: "+
				"create it empty (kubectl -n %s create secret generic %s) or bring your own key", key, err, namespace, SecretName)
		}
		if !apierrors.IsAlreadyExists(err) {
			return provenance.Signer{}, fmt.Errorf("creating Secret %s: %w", key, err)
		}
		secret = &corev1.Secret{}
		err = c.Get(ctx, key, secret)
	}
	if err != nil {
		return provenance.Signer{}, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	privPEM, ok := secret.Data[PrivateKeyField]
	if !ok {
		return provenance.Signer{}, fmt.Errorf("%w: Secret %s has no %q; fix or delete it (see the rotation procedure)", ErrKeySecretInvalid, key, PrivateKeyField)
	}
	priv, err := provenance.ParsePrivateKeyPEM(privPEM)
	if err != nil {
		return provenance.Signer{}, fmt.Errorf("%w: Secret %s, %q: %v", ErrKeySecretInvalid, key, PrivateKeyField, err)
	}
	return provenance.NewSigner(priv)
}

// publish makes the ConfigMap show the signer's public key as current, keeping any other key it
// showed as a previous one so no record becomes unverifiable by accident.
func publish(ctx context.Context, c client.Client, namespace string, signer provenance.Signer) error {
	pubPEM, err := provenance.MarshalPublicKeyPEM(signer.Public())
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: namespace, Name: ConfigMapName}
	return retry.OnError(retry.DefaultRetry, func(err error) bool {
		return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
	}, func() error {
		cm := &corev1.ConfigMap{}
		err := c.Get(ctx, key, cm)
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: ConfigMapName, Namespace: namespace, Labels: labels},
				Data:       map[string]string{PublicKeyField: string(pubPEM), KeyIDField: signer.KeyID()},
			}
			return c.Create(ctx, cm)
		}
		if err != nil {
			return fmt.Errorf("reading ConfigMap %s: %w", key, err)
		}
		current := cm.Data[PublicKeyField]
		if current == string(pubPEM) && cm.Data[KeyIDField] == signer.KeyID() {
			return nil
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		if current != "" && current != string(pubPEM) {
			if name, id := previousEntry(current); name != "" {
				cm.Data[name] = current
				ctrl.LoggerFrom(ctx).Info("The provenance signing key changed; the old public key stays published as a previous key",
					"configMap", key, "previousKeyid", id, "keyid", signer.KeyID())
			} else {
				ctrl.LoggerFrom(ctx).Info("Replacing a published provenance public key that is not one key", "configMap", key, "keyid", signer.KeyID())
			}
		}
		cm.Data[PublicKeyField] = string(pubPEM)
		cm.Data[KeyIDField] = signer.KeyID()
		return c.Update(ctx, cm)
	})
}

// PublicKeys reads the installation's public keys from the ConfigMap, current first.
func PublicKeys(ctx context.Context, c client.Reader, namespace string) ([]crypto.PublicKey, error) {
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ConfigMapName}, cm); err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, ConfigMapName, err)
	}
	return PublicKeysFromConfigMap(cm)
}

// PublicKeysFromConfigMap parses public.pem and every previous-*.pem of the ConfigMap, current
// first, then previous keys in name order. An entry that is not a public key is an error naming it.
func PublicKeysFromConfigMap(cm *corev1.ConfigMap) ([]crypto.PublicKey, error) {
	names := []string{PublicKeyField}
	var previous []string
	for name := range cm.Data {
		if strings.HasPrefix(name, PreviousKeyPrefix) && strings.HasSuffix(name, ".pem") {
			previous = append(previous, name)
		}
	}
	slices.Sort(previous)
	names = append(names, previous...)

	var keys []crypto.PublicKey
	for _, name := range names {
		data, ok := cm.Data[name]
		if !ok {
			return nil, fmt.Errorf("ConfigMap %s/%s has no %q", cm.Namespace, cm.Name, name)
		}
		parsed, err := provenance.ParsePublicKeysPEM([]byte(data))
		if err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s, %q: %w", cm.Namespace, cm.Name, name, err)
		}
		keys = append(keys, parsed...)
	}
	return keys, nil
}

// previousEntry is the ConfigMap key a replaced public key moves to, or "" when the text is not
// one public key.
func previousEntry(pubPEM string) (name, keyID string) {
	keys, err := provenance.ParsePublicKeysPEM([]byte(pubPEM))
	if err != nil || len(keys) != 1 {
		return "", ""
	}
	id, err := provenance.KeyID(keys[0])
	if err != nil {
		return "", ""
	}
	return PreviousKeyPrefix + id[:16] + ".pem", id
}

// fillPlaceholder writes a new key into the install's empty Secret, under optimistic concurrency:
// a replica that lost the race gets a conflict and reads the winner's key.
func fillPlaceholder(ctx context.Context, c client.Client, secret *corev1.Secret) (provenance.Signer, error) {
	priv, err := provenance.GenerateKey()
	if err != nil {
		return provenance.Signer{}, err
	}
	privPEM, err := provenance.MarshalPrivateKeyPEM(priv)
	if err != nil {
		return provenance.Signer{}, err
	}
	secret.Data = map[string][]byte{PrivateKeyField: privPEM}
	if err := c.Update(ctx, secret); err != nil {
		return provenance.Signer{}, err
	}
	return provenance.NewSigner(priv)
}
