package controllertest

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// CAPIFleet creates a Cluster whose infrastructure is a HypervisorCluster on sim.
func CAPIFleet(t *testing.T, ns string, sim *pvesim.Simulator) *clusterv1.Cluster {
	t.Helper()
	ProxmoxCluster(t, ns, "pve", sim)
	cluster := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "HypervisorCluster", Name: "pve"}},
	}
	NewWithT(t).Expect(Env.Client.Create(context.Background(), cluster)).To(Succeed())
	return cluster
}

// StartFleet starts Cluster API, a Proxmox simulator and the manager, and creates a runner fleet's
// Cluster on that simulator in a new namespace.
func StartFleet(t *testing.T) (*pvesim.Simulator, string, *clusterv1.Cluster) {
	t.Helper()
	StartCAPI(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	StartManager(t)
	ns := NewNamespace(t)
	return sim, ns, CAPIFleet(t, ns, sim)
}

// CAPIMachineWithConfig creates config, a MachineClaim (changed by mutateClaim) and a Machine using
// both, all named like config, in the Cluster "fleet"; it returns the claim.
func CAPIMachineWithConfig(t *testing.T, ns string, config *bootstrapv1.BootstrapConfig, mutateClaim ...func(*infrav1.MachineClaim)) *infrav1.MachineClaim {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	name := config.Name
	labels := map[string]string{clusterv1.ClusterNameLabel: "fleet"}
	config.Labels = labels
	g.Expect(Env.Client.Create(ctx, config)).To(Succeed())
	claim := builder.NewMachineClaim(name, ns).WithLabels(labels).Build()
	for _, mutate := range mutateClaim {
		mutate(claim)
	}
	g.Expect(Env.Client.Create(ctx, claim)).To(Succeed())
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: clusterv1.MachineSpec{
			ClusterName: "fleet",
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapv1.GroupVersion.Group, Kind: "BootstrapConfig", Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MachineClaim", Name: name},
		},
	}
	g.Expect(Env.Client.Create(ctx, machine)).To(Succeed())
	return claim
}
