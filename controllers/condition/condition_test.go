package condition

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

// TestMirror: Ready is Unknown/Pending until its cause exists, then reads like it, with the
// object's generation.
func TestMirror(t *testing.T) {
	g := NewWithT(t)
	pool := &fleetv1.VMPool{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	Mirror(pool, "Cause", fleetv1.ReadyCondition)
	g.Expect(conditions.Get(pool, fleetv1.ReadyCondition)).To(And(
		HaveField("Status", metav1.ConditionUnknown), HaveField("Reason", fleetv1.PendingReason)))

	conditions.Set(pool, metav1.Condition{Type: "Cause", Status: metav1.ConditionFalse, Reason: "NoHost", Message: "no host fits"})
	Mirror(pool, "Cause", fleetv1.ReadyCondition)
	g.Expect(conditions.Get(pool, fleetv1.ReadyCondition)).To(And(HaveField("Status", metav1.ConditionFalse),
		HaveField("Reason", "NoHost"), HaveField("Message", "no host fits"), HaveField("ObservedGeneration", int64(3))))
}

// TestTruncate keeps a message within the limit and marks the cut.
func TestTruncate(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Truncate("short", 10)).To(Equal("short"))
	long := strings.Repeat("x", 20)
	g.Expect(Truncate(long, 10)).To(Equal("xxxxxxx..."))
	g.Expect(Truncate(long, 10)).To(HaveLen(10))
}
