package vmpool

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hyperfleet-io/hyperfleet/api"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// TestVMPoolCountsAClaimReadyOnlyWhenItsPhaseAgrees: a claim read between its controller's two
// status patches says Ready (the conditions landed) while its phase is still Provisioning (the
// rest did not). The pool neither counts it Ready nor Available, so its status never says "3
// available" while listing a VM as provisioning; once the phase follows, the claim counts.
func TestVMPoolCountsAClaimReadyOnlyWhenItsPhaseAgrees(t *testing.T) {
	g := NewWithT(t)
	now := time.Now()
	pool := &fleetv1.VMPool{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", UID: "pool-uid"}}
	claim := &infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{
		Name: "web-abc-1", Namespace: "team-a", Labels: map[string]string{fleetv1.VMPoolNameLabel: "web"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: fleetv1.GroupVersion.String(), Kind: "VMPool", Name: "web",
			UID: "pool-uid", Controller: ptr.To(true)}},
		CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
	}}
	claim.Status.Phase = infrav1.MachineClaimPhaseProvisioning
	claim.Status.Conditions = []metav1.Condition{{Type: infrav1.ReadyCondition, Status: metav1.ConditionTrue,
		Reason: infrav1.VMRunningReason, LastTransitionTime: metav1.NewTime(now.Add(-10 * time.Second))}}
	c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(claim).WithStatusSubresource(claim).Build()
	r := &Reconciler{Client: c, Now: func() time.Time { return now }}

	s := &vmPoolScope{pool: pool}
	_, err := r.reconcileClaims(context.Background(), s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.vms).To(HaveLen(1))
	g.Expect(s.vms[0].Ready).To(BeFalse(), "Ready condition without the phase to match is a claim half patched")
	g.Expect(s.vms[0].Available).To(BeFalse())

	claim.Status.Phase = infrav1.MachineClaimPhaseRunning
	g.Expect(c.Status().Update(context.Background(), claim)).To(Succeed())
	s = &vmPoolScope{pool: pool}
	_, err = r.reconcileClaims(context.Background(), s)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.vms[0].Ready && s.vms[0].Available).To(BeTrue())
}
