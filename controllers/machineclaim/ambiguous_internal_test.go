package machineclaim

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// TestAmbiguousUntil: a VM recorded running at t may already use memory in a node listing made a
// little before t, and reservedSince counts it as started since any listing made up to a second
// after t: a claim finding no room on such a listing must look again after t+2 s rather than wait
// in line, where nothing would wake it. A VM recorded well before or after the listing is counted
// exactly once.
func TestAmbiguousUntil(t *testing.T) {
	g := NewWithT(t)
	at := time.Date(2026, 11, 25, 4, 0, 10, 0, time.UTC)
	running := func(name string, when time.Time) infrav1.MachineClaim {
		c := infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}}
		c.Status.Node, c.Status.CompletedStep = "pve1", infrav1.StepStarted
		c.Status.Conditions = []metav1.Condition{{Type: infrav1.MachineClaimVMProvisionedCondition, Status: metav1.ConditionTrue,
			Reason: infrav1.VMRunningReason, LastTransitionTime: metav1.Time{Time: when}}}
		return c
	}
	claims := []infrav1.MachineClaim{running("old", at.Add(-time.Minute))}
	g.Expect(ambiguousUntil(claims, "self", at)).To(BeZero(), "long in the listing, not counted again")

	claims = append(claims, running("fresh", at.Add(-500*time.Millisecond)))
	g.Expect(ambiguousUntil(claims, "self", at)).To(Equal(at.Add(1500*time.Millisecond)), "recorded just before the listing")
	g.Expect(ambiguousUntil(claims, "fresh", at)).To(BeZero(), "a claim is never ambiguous to itself")

	later := []infrav1.MachineClaim{running("later", at.Add(5*time.Second))}
	g.Expect(ambiguousUntil(later, "self", at)).To(Equal(at.Add(7*time.Second)), "recorded after the listing: it may have booted before it")
	g.Expect(ambiguousUntil(later, "self", at.Add(7*time.Second))).To(BeZero(), "a listing made after t+1 s shows it and does not count it again")
}
