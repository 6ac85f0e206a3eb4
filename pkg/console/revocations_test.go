package console

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestRevocations: a sign-out is seen by every replica, drops expired entries, survives a
// concurrent write, and a replica that cannot read the list for a while trusts no session.
func TestRevocations(t *testing.T) {
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "hyperfleet-system", Name: "hyperfleet-console-sessions"}
	future := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	list := func(data map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Data: data}
	}

	t.Run("every replica refuses a signed-out session", func(t *testing.T) {
		g := NewWithT(t)
		c := fake.NewClientBuilder().WithObjects(list(map[string]string{
			"expired": time.Now().Add(-time.Minute).UTC().Format(time.RFC3339),
			"garbled": "soon",
		})).Build()
		here, there := newRevocations(c, key), newRevocations(c, key)
		g.Expect(there.isRevoked(ctx, "s1")).To(BeFalse())
		g.Expect(here.revoke(ctx, "s1", future)).To(Succeed())
		g.Expect(here.isRevoked(ctx, "s1")).To(BeTrue(), "at once where it was signed out")
		there.triedAt = time.Now().Add(-revocationsRefresh)
		g.Expect(there.isRevoked(ctx, "s1")).To(BeTrue(), "at the next read elsewhere")
		g.Expect(there.isRevoked(ctx, "s2")).To(BeFalse())
		cm := &corev1.ConfigMap{}
		g.Expect(c.Get(ctx, key, cm)).To(Succeed())
		g.Expect(cm.Data).To(Equal(map[string]string{"s1": future.Format(time.RFC3339)}), "expired and unreadable entries are dropped")
	})

	t.Run("a concurrent sign-out is not lost", func(t *testing.T) {
		g := NewWithT(t)
		base := fake.NewClientBuilder().WithObjects(list(nil)).Build()
		raced := false
		c := interceptor.NewClient(base, interceptor.Funcs{Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if !raced {
				// Another replica writes between this one's read and its update.
				raced = true
				g.Expect(newRevocations(base, key).revoke(ctx, "other", future)).To(Succeed())
			}
			return cl.Update(ctx, obj, opts...)
		}})
		g.Expect(newRevocations(c, key).revoke(ctx, "mine", future)).To(Succeed())
		cm := &corev1.ConfigMap{}
		g.Expect(base.Get(ctx, key, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKey("mine"))
		g.Expect(cm.Data).To(HaveKey("other"))
	})

	t.Run("no list installed", func(t *testing.T) {
		g := NewWithT(t)
		r := newRevocations(fake.NewClientBuilder().Build(), key)
		g.Expect(r.isRevoked(ctx, "s1")).To(BeFalse())
		g.Expect(r.revoke(ctx, "s1", future)).To(MatchError(ContainSubstring("does not exist")))
	})

	t.Run("a full list refuses the sign-out", func(t *testing.T) {
		g := NewWithT(t)
		data := map[string]string{}
		for i := range maxRevocations {
			data[fmt.Sprint("s", i)] = future.Format(time.RFC3339)
		}
		r := newRevocations(fake.NewClientBuilder().WithObjects(list(data)).Build(), key)
		g.Expect(r.revoke(ctx, "one-more", future)).To(MatchError(errRevocationsFull))
	})

	t.Run("an unreadable list", func(t *testing.T) {
		g := NewWithT(t)
		failing := false
		c := interceptor.NewClient(fake.NewClientBuilder().WithObjects(list(map[string]string{"s1": future.Format(time.RFC3339)})).Build(),
			interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if failing {
					return apierrors.NewServiceUnavailable("etcd is down")
				}
				return cl.Get(ctx, k, obj, opts...)
			}})
		r := newRevocations(c, key)
		g.Expect(r.isRevoked(ctx, "s1")).To(BeTrue())
		failing = true
		r.triedAt = time.Now().Add(-revocationsRefresh)
		g.Expect(r.isRevoked(ctx, "s1")).To(BeTrue(), "the last list serves for a while")
		g.Expect(r.isRevoked(ctx, "s2")).To(BeFalse())
		r.triedAt, r.readAt = time.Now().Add(-revocationsRefresh), time.Now().Add(-revocationsStale-time.Second)
		_, err := r.isRevoked(ctx, "s2")
		g.Expect(errors.Is(err, errRevocationsUnavailable)).To(BeTrue(), "then no session is trusted: %v", err)
		failing = false
		r.triedAt = time.Now().Add(-revocationsRefresh)
		g.Expect(r.isRevoked(ctx, "s2")).To(BeFalse())
	})
}
