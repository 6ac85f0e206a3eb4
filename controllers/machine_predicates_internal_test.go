package controllers

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func TestMachineStatusWritesWakeNoClaimOrConfig(t *testing.T) {
	g := NewWithT(t)
	p := machineChangedBeyondStatus()
	base := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "runner-1", Namespace: "ns", Generation: 1,
		Labels: map[string]string{clusterv1.ClusterNameLabel: "fleet"}, ResourceVersion: "10"}}
	changed := func(mutate func(m *clusterv1.Machine)) bool {
		m := base.DeepCopy()
		m.ResourceVersion = "11"
		mutate(m)
		return p.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: m})
	}
	g.Expect(changed(func(m *clusterv1.Machine) { m.Status.Phase = "Provisioning" })).To(BeFalse(), "status only")
	g.Expect(changed(func(m *clusterv1.Machine) {
		m.Status.Conditions = []metav1.Condition{{Type: "InfrastructureReady", Status: metav1.ConditionFalse, Reason: "Cloning"}}
	})).To(BeFalse(), "a mirrored condition")
	g.Expect(changed(func(m *clusterv1.Machine) { m.Generation = 2; m.Spec.Bootstrap.DataSecretName = ptrTo("runner-1") })).To(BeTrue(), "spec")
	g.Expect(changed(func(m *clusterv1.Machine) { m.Annotations = map[string]string{"x": "y"} })).To(BeTrue(), "annotations (the sweep's marks)")
	g.Expect(changed(func(m *clusterv1.Machine) { m.Labels["extra"] = "1" })).To(BeTrue(), "labels")
	g.Expect(changed(func(m *clusterv1.Machine) { m.Finalizers = []string{clusterv1.MachineFinalizer} })).To(BeTrue(), "finalizers")
	g.Expect(changed(func(m *clusterv1.Machine) {
		m.OwnerReferences = []metav1.OwnerReference{{Kind: "RunnerPool", Name: "pool", UID: "u"}}
	})).To(BeTrue(), "owners")
	g.Expect(changed(func(m *clusterv1.Machine) { m.DeletionTimestamp = &metav1.Time{Time: time.Now()} })).To(BeTrue(), "deletion")
	g.Expect(p.Create(event.CreateEvent{Object: base})).To(BeTrue())
	g.Expect(p.Delete(event.DeleteEvent{Object: base})).To(BeTrue())
}

func ptrTo[T any](v T) *T { return &v }
