package custody_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"sync"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
	"github.com/hyperfleet-io/hyperfleet/pkg/provenance/custody"
)

func getSecret(t *testing.T, ns string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	NewWithT(t).Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: custody.SecretName}, s)).To(Succeed())
	return s
}

func getConfigMap(t *testing.T, ns string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	NewWithT(t).Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: custody.ConfigMapName}, cm)).To(Succeed())
	return cm
}

func signJob(t *testing.T, signer provenance.Signer, jobID string) provenance.Envelope {
	t.Helper()
	g := NewWithT(t)
	st, err := provenance.NewStatement("github", jobID, map[string]string{"vm": "runner-" + jobID, "outcome": "succeeded"})
	g.Expect(err).NotTo(HaveOccurred())
	env, err := signer.Sign(st)
	g.Expect(err).NotTo(HaveOccurred())
	return env
}

func TestEnsureKeyCreatesTheKeyOnceAndPublishesIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)

	signer, err := custody.EnsureKey(ctx, env.Client, ns)
	g.Expect(err).NotTo(HaveOccurred())
	secret := getSecret(t, ns)
	g.Expect(secret.Immutable).To(HaveValue(BeTrue()), "nobody edits the key in place")
	g.Expect(secret.OwnerReferences).To(BeEmpty(), "the key outlives whatever created it")
	g.Expect(secret.Data).To(HaveKey(custody.PrivateKeyField))

	cm := getConfigMap(t, ns)
	g.Expect(cm.Data).To(HaveKeyWithValue(custody.KeyIDField, signer.KeyID()))
	g.Expect(cm.Data[custody.PublicKeyField]).NotTo(ContainSubstring("PRIVATE"))
	keys, err := custody.PublicKeys(ctx, env.Client, ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys).To(HaveLen(1))
	_, err = provenance.Verify(signJob(t, signer, "1"), keys...)
	g.Expect(err).NotTo(HaveOccurred())

	again, err := custody.EnsureKey(ctx, env.Client, ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.KeyID()).To(Equal(signer.KeyID()))
	g.Expect(getSecret(t, ns).ResourceVersion).To(Equal(secret.ResourceVersion))
	g.Expect(getConfigMap(t, ns).ResourceVersion).To(Equal(cm.ResourceVersion), "nothing to write when all is in place")
}

func TestReplicasStartingTogetherShareOneKey(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	const replicas = 5
	ids := make([]string, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() {
			s, err := custody.EnsureKey(context.Background(), env.Client, ns)
			ids[i], errs[i] = s.KeyID(), err
		})
	}
	wg.Wait()
	for i := range replicas {
		g.Expect(errs[i]).NotTo(HaveOccurred())
		g.Expect(ids[i]).To(Equal(ids[0]))
	}
	g.Expect(getConfigMap(t, ns).Data).To(HaveKeyWithValue(custody.KeyIDField, ids[0]))
}

// TestASecretOfTheWrongShapeIsLeftAlone: whatever a person put under the key's name is theirs;
// EnsureKey says what is wrong and changes nothing.
func TestASecretOfTheWrongShapeIsLeftAlone(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	rsaDER, err := x509.MarshalPKCS8PrivateKey(rsaKey)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	edKey, err := provenance.GenerateKey()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	edPublic, err := provenance.MarshalPublicKeyPEM(edKey.Public())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct {
		name string
		data map[string][]byte
	}{
		{"no private.pem", map[string][]byte{"tls.key": []byte("x")}},
		{"not PEM", map[string][]byte{custody.PrivateKeyField: []byte("hunter2")}},
		{"a public key", map[string][]byte{custody.PrivateKeyField: edPublic}},
		{"an RSA key", map[string][]byte{custody.PrivateKeyField: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: rsaDER})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := newNamespace(t)
			theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: custody.SecretName, Namespace: ns}, Data: tc.data}
			g.Expect(env.Client.Create(ctx, theirs)).To(Succeed())

			_, err := custody.EnsureKey(ctx, env.Client, ns)
			g.Expect(err).To(MatchError(custody.ErrKeySecretInvalid))
			after := getSecret(t, ns)
			g.Expect(after.ResourceVersion).To(Equal(theirs.ResourceVersion))
			g.Expect(after.Data).To(Equal(tc.data))
			err = env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: custody.ConfigMapName}, &corev1.ConfigMap{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no public key published for a key that is not there")
		})
	}
}

func TestAKeyBroughtByThePersonIsUsed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	privPEM, err := provenance.MarshalPrivateKeyPEM(key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: custody.SecretName, Namespace: ns},
		Data:       map[string][]byte{custody.PrivateKeyField: privPEM},
	})).To(Succeed())

	signer, err := custody.EnsureKey(ctx, env.Client, ns)
	g.Expect(err).NotTo(HaveOccurred())
	want, err := provenance.KeyID(&key.PublicKey)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(signer.KeyID()).To(Equal(want))
	_, err = provenance.Verify(signJob(t, signer, "7"), &key.PublicKey)
	g.Expect(err).NotTo(HaveOccurred())
}

// TestRotation follows the documented procedure: delete the Secret, start again. Records signed
// before and after both verify with the keys the ConfigMap publishes, and only the retired key's
// removal makes the old records fail.
func TestRotation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	first, err := custody.EnsureKey(ctx, env.Client, ns)
	g.Expect(err).NotTo(HaveOccurred())
	before := signJob(t, first, "100")

	g.Expect(env.Client.Delete(ctx, getSecret(t, ns))).To(Succeed())
	second, err := custody.EnsureKey(ctx, env.Client, ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second.KeyID()).NotTo(Equal(first.KeyID()))
	after := signJob(t, second, "101")

	cm := getConfigMap(t, ns)
	previousName := custody.PreviousKeyPrefix + first.KeyID()[:16] + ".pem"
	g.Expect(cm.Data).To(HaveKey(previousName))
	g.Expect(cm.Data).To(HaveKeyWithValue(custody.KeyIDField, second.KeyID()))
	keys, err := custody.PublicKeys(ctx, env.Client, ns)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys).To(HaveLen(2))
	g.Expect(keys[0]).To(Equal(second.Public()), "current key first")

	_, pub, err := provenance.VerifyKey(before, keys...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pub).To(Equal(first.Public()))
	_, pub, err = provenance.VerifyKey(after, keys...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pub).To(Equal(second.Public()))

	delete(cm.Data, previousName)
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	keys, err = custody.PublicKeys(ctx, env.Client, ns)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = provenance.Verify(before, keys...)
	g.Expect(err).To(MatchError(provenance.ErrUnknownKey))
}

// TestThePublishedKeyIsRestored: a ConfigMap edited to show another key, or nothing usable, shows
// the installation's key again on the next start; a key it showed stays as a previous one, since
// HyperFleet cannot tell whether records were signed with it.
func TestThePublishedKeyIsRestored(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	signer, err := custody.EnsureKey(ctx, env.Client, ns)
	g.Expect(err).NotTo(HaveOccurred())
	ours := getConfigMap(t, ns).Data[custody.PublicKeyField]

	other, err := provenance.GenerateKey()
	g.Expect(err).NotTo(HaveOccurred())
	otherPEM, err := provenance.MarshalPublicKeyPEM(other.Public())
	g.Expect(err).NotTo(HaveOccurred())
	otherID, err := provenance.KeyID(other.Public())
	g.Expect(err).NotTo(HaveOccurred())
	cm := getConfigMap(t, ns)
	cm.Data[custody.PublicKeyField] = string(otherPEM)
	cm.Data[custody.KeyIDField] = otherID
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())

	_, err = custody.EnsureKey(ctx, env.Client, ns)
	g.Expect(err).NotTo(HaveOccurred())
	cm = getConfigMap(t, ns)
	g.Expect(cm.Data).To(HaveKeyWithValue(custody.PublicKeyField, ours))
	g.Expect(cm.Data).To(HaveKeyWithValue(custody.KeyIDField, signer.KeyID()))
	g.Expect(cm.Data).To(HaveKeyWithValue(custody.PreviousKeyPrefix+otherID[:16]+".pem", string(otherPEM)))

	cm.Data[custody.PublicKeyField] = "not a key"
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	_, err = custody.EnsureKey(ctx, env.Client, ns)
	g.Expect(err).NotTo(HaveOccurred())
	cm = getConfigMap(t, ns)
	g.Expect(cm.Data).To(HaveKeyWithValue(custody.PublicKeyField, ours))
	g.Expect(cm.Data).To(HaveLen(3), "public.pem, keyid and the one previous key")
}

func TestPublicKeysNamesABrokenEntry(t *testing.T) {
	g := NewWithT(t)
	key, err := provenance.GenerateKey()
	g.Expect(err).NotTo(HaveOccurred())
	pubPEM, err := provenance.MarshalPublicKeyPEM(key.Public())
	g.Expect(err).NotTo(HaveOccurred())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: custody.ConfigMapName}, Data: map[string]string{
		custody.PublicKeyField:                  string(pubPEM),
		custody.PreviousKeyPrefix + "notes.txt": "not a .pem entry, not read",
	}}
	keys, err := custody.PublicKeysFromConfigMap(cm)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keys).To(HaveLen(1))

	cm.Data[custody.PreviousKeyPrefix+"oops.pem"] = "garbage"
	_, err = custody.PublicKeysFromConfigMap(cm)
	g.Expect(err).To(MatchError(ContainSubstring(`"previous-oops.pem"`)))
	delete(cm.Data, custody.PublicKeyField)
	_, err = custody.PublicKeysFromConfigMap(cm)
	g.Expect(err).To(MatchError(ContainSubstring(`no "public.pem"`)))
}

// The installs ship the Secret empty, since the manager may not create Secrets in its namespace:
// replicas starting together fill it once, all with one key, and it is then used as any other.
func TestTheInstallsEmptySecretIsFilledOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: custody.SecretName, Namespace: ns}})).To(Succeed())

	const replicas = 4
	ids := make([]string, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Go(func() {
			signer, err := custody.EnsureKey(ctx, env.Client, ns)
			g.Expect(err).NotTo(HaveOccurred())
			ids[i] = signer.KeyID()
		})
	}
	wg.Wait()
	for _, id := range ids {
		g.Expect(id).To(Equal(ids[0]), "one key for every replica")
	}
	s := getSecret(t, ns)
	g.Expect(s.Data).To(HaveKey(custody.PrivateKeyField))
	keys, err := custody.PublicKeys(ctx, env.Client, ns)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = provenance.Verify(signJob(t, mustEnsure(t, ns), "9"), keys...)
	g.Expect(err).NotTo(HaveOccurred())
}

func mustEnsure(t *testing.T, ns string) provenance.Signer {
	t.Helper()
	s, err := custody.EnsureKey(context.Background(), env.Client, ns)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return s
}
