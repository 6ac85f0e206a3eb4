package controllertest

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// RunnerTemplates creates the MachineClaimTemplate and BootstrapConfigTemplate named "runner".
func RunnerTemplates(t *testing.T, ns string) {
	t.Helper()
	g := NewWithT(t)
	mct := builder.NewMachineClaimTemplate("runner", ns).Build()
	g.Expect(Env.Client.Create(context.Background(), mct)).To(Succeed())
	bct := &bootstrapv1.BootstrapConfigTemplate{ObjectMeta: metav1.ObjectMeta{Name: "runner", Namespace: ns}}
	g.Expect(Env.Client.Create(context.Background(), bct)).To(Succeed())
}

// PoolMachines are the pool's Machines not being deleted.
func PoolMachines(g Gomega, pool *fleetv1.RunnerPool) []clusterv1.Machine {
	list := &clusterv1.MachineList{}
	g.Expect(Env.Client.List(context.Background(), list, client.InNamespace(pool.Namespace),
		client.MatchingLabels{fleetv1.RunnerPoolNameLabel: pool.Name})).To(Succeed())
	var live []clusterv1.Machine
	for _, m := range list.Items {
		if m.DeletionTimestamp.IsZero() {
			live = append(live, m)
		}
	}
	return live
}
