package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hyperfleet-io/hyperfleet/api"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// countingReader counts Gets, standing for the API server behind the cache.
type countingReader struct {
	client.Reader
	gets int
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets++
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestClaimIsReadPastTheCacheUnlessItIsWhatWeWrote: a reconcile reads the claim from the cache
// only when the cache holds the very version (UID and resourceVersion) this process's last
// reconcile of it left; otherwise, including after a restart and when the cache lags behind a
// write, from the API server.
func TestClaimIsReadPastTheCacheUnlessItIsWhatWeWrote(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	claim := &infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "runner-1", UID: "uid-1", ResourceVersion: "7"}}
	// The cache and the API server are two stores: the cache may lag.
	cache := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(claim.DeepCopy()).Build()
	server := &countingReader{Reader: fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(claim.DeepCopy()).Build()}
	r := &MachineClaimReconciler{Client: cache, APIReader: server}
	key := client.ObjectKeyFromObject(claim)
	read := func() *infrav1.MachineClaim {
		got, err := r.readClaim(ctx, key)
		g.Expect(err).NotTo(HaveOccurred())
		return got
	}

	read()
	g.Expect(server.gets).To(Equal(1), "nothing written yet (a new process): past the cache")

	cached := &infrav1.MachineClaim{}
	g.Expect(cache.Get(ctx, key, cached)).To(Succeed())
	r.written.Store(key, writtenVersion{uid: cached.UID, resourceVersion: cached.ResourceVersion})
	read()
	g.Expect(server.gets).To(Equal(1), "the cache holds what the last reconcile wrote")

	// Our next write reached the API server but not the cache yet.
	r.written.Store(key, writtenVersion{uid: cached.UID, resourceVersion: "999"})
	read()
	g.Expect(server.gets).To(Equal(2), "the cache is behind our own write: past the cache")

	// The same name, another object (deleted and created again).
	r.written.Store(key, writtenVersion{uid: "uid-0", resourceVersion: cached.ResourceVersion})
	read()
	g.Expect(server.gets).To(Equal(3), "another object of the same name: past the cache")

	// Gone from the API server: nil, and forgotten.
	g.Expect(server.Reader.(client.Client).Delete(ctx, claim.DeepCopy())).To(Succeed())
	g.Expect(read()).To(BeNil())
	_, kept := r.written.Load(key)
	g.Expect(kept).To(BeFalse())
}
