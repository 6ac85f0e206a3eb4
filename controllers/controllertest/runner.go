package controllertest

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
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

// SetRunnerConfigTime records on the BootstrapConfig ns/name that the bootstrap service issued its
// runner configuration at at (nil: never).
func SetRunnerConfigTime(t *testing.T, ns, name string, at *metav1.Time) {
	t.Helper()
	NewWithT(t).Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		bc := &bootstrapv1.BootstrapConfig{}
		if err := Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, bc); err != nil {
			return err
		}
		bc.Status.RunnerConfigTime = at
		return Env.Client.Status().Update(context.Background(), bc)
	})).To(Succeed())
}
