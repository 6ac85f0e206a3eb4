package hypervisorcluster_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/clusterruntime"
	"github.com/hyperfleet-io/hyperfleet/controllers/hypervisorcluster"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// A manager without a builder for a HypervisorCluster's provider kind (one written for a newer
// HyperFleet) says so in the Available condition, without reading its Secrets or connecting.
func TestHypervisorClusterOfAnUnregisteredProviderIsNotConnected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	// The credentials Secret does not exist: a provider that tried to connect would report
	// CredentialsNotFound instead.
	hc := builder.NewHypervisorCluster("unregistered", ns).WithEndpoint("https://127.0.0.1:1").Build()
	g.Expect(env.Client.Create(ctx, hc)).To(Succeed())

	registry := connection.NewRegistry(env.Client, time.Second, nil)
	r := &hypervisorcluster.Reconciler{Client: env.Client, Recorder: record.NewFakeRecorder(10), Registry: registry,
		Clusters:        clusterruntime.New(env.Client, registry),
		DefaultInterval: time.Minute}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(hc)}
	// The finalizer, the Paused condition and the installation ID come first, then the connection.
	var got *infrav1.HypervisorCluster
	g.Eventually(func(g Gomega) {
		_, err := r.Reconcile(ctx, req)
		g.Expect(err).NotTo(HaveOccurred())
		got = get(g, hc)
		g.Expect(got.Spec.InstallationID).NotTo(BeEmpty())
		available := conditions.Get(got, infrav1.HypervisorClusterAvailableCondition)
		g.Expect(available).NotTo(BeNil())
		g.Expect(available.Reason).NotTo(Equal(infrav1.HypervisorClusterIdentityPendingReason))
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())

	available := conditions.Get(got, infrav1.HypervisorClusterAvailableCondition)
	g.Expect(available.Status).To(BeEquivalentTo("False"))
	g.Expect(available.Reason).To(Equal(infrav1.HypervisorClusterUnsupportedProviderReason))
	g.Expect(available.Message).To(And(ContainSubstring(`"Proxmox"`), ContainSubstring("supported: none")))
	ready := conditions.Get(got, infrav1.ReadyCondition)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(BeEquivalentTo("False"))
	g.Expect(got.Status.Nodes).To(BeZero())
}
