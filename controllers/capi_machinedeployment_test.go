package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestMachineDeploymentConsumesMachineClaimTemplate keeps the promise MachineClaimTemplate's API
// comment makes: the real Cluster API manager's MachineDeployment and MachineSet controllers clone
// the template into one MachineClaim per Machine (with the template's metadata), each gets its own
// VM, a scale-down destroys the VM of the Machine it removes, and deleting the MachineDeployment
// destroys the rest.
func TestMachineDeploymentConsumesMachineClaimTemplate(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim, ns, _ := startFleet(t)
	template := builder.NewMachineClaimTemplate("worker", ns).Build()
	template.Spec.Template.ObjectMeta = clusterv1.ObjectMeta{Labels: map[string]string{"tier": "worker"}}
	g.Expect(env.Client.Create(ctx, template)).To(Succeed())
	bootstrapSecret(t, ns, "workers-bootstrap", controllertest.UserData)
	selector := map[string]string{"deployment": "workers"}
	md := &clusterv1.MachineDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: ns},
		Spec: clusterv1.MachineDeploymentSpec{
			ClusterName: "fleet",
			Replicas:    ptr.To[int32](2),
			Selector:    metav1.LabelSelector{MatchLabels: selector},
			// What Cluster API's defaulting webhook (not served by this API server) would set.
			Rollout: clusterv1.MachineDeploymentRolloutSpec{Strategy: clusterv1.MachineDeploymentRolloutStrategy{
				Type: clusterv1.RollingUpdateMachineDeploymentStrategyType,
				RollingUpdate: clusterv1.MachineDeploymentRolloutStrategyRollingUpdate{
					MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}}},
			Template: clusterv1.MachineTemplateSpec{
				ObjectMeta: clusterv1.ObjectMeta{Labels: selector},
				Spec: clusterv1.MachineSpec{
					ClusterName: "fleet",
					Bootstrap:   clusterv1.Bootstrap{DataSecretName: ptr.To("workers-bootstrap")},
					InfrastructureRef: clusterv1.ContractVersionedObjectReference{
						APIGroup: infrav1.GroupVersion.Group, Kind: "MachineClaimTemplate", Name: "worker"},
				},
			},
		},
	}
	g.Expect(env.Client.Create(ctx, md)).To(Succeed())

	claims := func(g Gomega) []infrav1.MachineClaim {
		list := &infrav1.MachineClaimList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"tier": "worker"})).To(Succeed())
		var live []infrav1.MachineClaim
		for _, c := range list.Items {
			if c.DeletionTimestamp.IsZero() {
				live = append(live, c)
			}
		}
		return live
	}
	g.Eventually(func(g Gomega) {
		got := claims(g)
		g.Expect(got).To(HaveLen(2))
		for _, c := range got {
			g.Expect(c.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady), "claim %s", c.Name)
			g.Expect(vmStatus(sim, &c)()).To(Equal("running"))
		}
		machines := &clusterv1.MachineList{}
		g.Expect(env.Client.List(ctx, machines, client.InNamespace(ns), client.MatchingLabels(selector))).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(2))
		for _, m := range machines.Items {
			g.Expect(m.Spec.ProviderID).To(HavePrefix(infrav1.ProviderIDPrefix), "machine %s", m.Name)
		}
	}, 90*time.Second, 200*time.Millisecond).Should(Succeed(), func() string {
		return "two Machines, two claims cloned from the template, two VMs; " + describeMachineDeployment(ctx, ns, md)
	})
	before := claims(g)
	vms := map[string]*infrav1.MachineClaim{}
	for i := range before {
		vms[before[i].Name] = &before[i]
	}

	patch := client.MergeFrom(md.DeepCopy())
	md.Spec.Replicas = ptr.To[int32](1)
	g.Expect(env.Client.Patch(ctx, md, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(claims(g)).To(HaveLen(1))
		gone := 0
		for _, c := range vms {
			if vmStatus(sim, c)() == "gone" {
				gone++
			}
		}
		g.Expect(gone).To(Equal(1), "the removed Machine's VM is destroyed, the other's kept")
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())

	g.Expect(env.Client.Delete(ctx, md)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(claims(g)).To(BeEmpty())
		for _, c := range vms {
			g.Expect(vmStatus(sim, c)()).To(Equal("gone"))
		}
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
}

// describeMachineDeployment says where a MachineDeployment's rollout stands, for a failure message.
func describeMachineDeployment(ctx context.Context, ns string, md *clusterv1.MachineDeployment) string {
	out := ""
	got := &clusterv1.MachineDeployment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(md), got); err == nil {
		out += fmt.Sprintf("MachineDeployment replicas %v, conditions %v; ", ptr.Deref(got.Status.Replicas, 0), got.Status.Conditions)
	}
	sets := &clusterv1.MachineSetList{}
	if err := env.Client.List(ctx, sets, client.InNamespace(ns)); err == nil {
		for _, s := range sets.Items {
			out += fmt.Sprintf("MachineSet %s conditions %v; ", s.Name, s.Status.Conditions)
		}
	}
	machines := &clusterv1.MachineList{}
	if err := env.Client.List(ctx, machines, client.InNamespace(ns)); err == nil {
		for _, m := range machines.Items {
			out += fmt.Sprintf("Machine %s phase %s conditions %v; ", m.Name, m.Status.Phase, m.Status.Conditions)
		}
	}
	return out
}
