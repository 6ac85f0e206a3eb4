package connection

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// countingReader counts the reads that reach the API server.
type countingReader struct {
	client.Reader
	gets int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestSecretsAreReusedForTheirTTLOnly: a Secret read is reused within the TTL (a burst of claims
// costs one read, not one per reconcile), a rotation is seen once the TTL has passed, and a
// failed read is never reused: a Secret deleted or made unreadable is refused at the next read
// after the TTL, and one that was missing is read again at once.
func TestSecretsAreReusedForTheirTTLOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "team-a", Name: "pve-credentials"}
	c := fake.NewClientBuilder().Build()
	api := &countingReader{Reader: c}
	now := time.Unix(1000, 0)
	r := newSecretReader(api, 10*time.Second)
	r.now = func() time.Time { return now }

	got := &corev1.Secret{}
	g.Expect(apierrors.IsNotFound(r.Get(ctx, key, got))).To(BeTrue())
	g.Expect(apierrors.IsNotFound(r.Get(ctx, key, got))).To(BeTrue(), "a missing Secret is asked for again")
	g.Expect(api.gets).To(Equal(2))

	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
		Data: map[string][]byte{"token": []byte("old")}})).To(Succeed())
	for range 50 {
		g.Expect(r.Get(ctx, key, got)).To(Succeed())
		g.Expect(string(got.Data["token"])).To(Equal("old"))
	}
	g.Expect(api.gets).To(Equal(3), "fifty reads within the TTL cost one")
	got.Data["token"] = []byte("changed by the caller")
	g.Expect(r.Get(ctx, key, got)).To(Succeed())
	g.Expect(string(got.Data["token"])).To(Equal("old"), "callers get copies")

	rotated := &corev1.Secret{}
	g.Expect(c.Get(ctx, key, rotated)).To(Succeed())
	rotated.Data["token"] = []byte("new")
	g.Expect(c.Update(ctx, rotated)).To(Succeed())
	now = now.Add(9 * time.Second)
	g.Expect(r.Get(ctx, key, got)).To(Succeed())
	g.Expect(string(got.Data["token"])).To(Equal("old"), "within the TTL")
	now = now.Add(2 * time.Second)
	g.Expect(r.Get(ctx, key, got)).To(Succeed())
	g.Expect(string(got.Data["token"])).To(Equal("new"), "the rotation is seen once the TTL passed")

	g.Expect(c.Delete(ctx, rotated)).To(Succeed())
	now = now.Add(11 * time.Second)
	g.Expect(apierrors.IsNotFound(r.Get(ctx, key, got))).To(BeTrue(), "a deleted Secret is refused after the TTL")
}
