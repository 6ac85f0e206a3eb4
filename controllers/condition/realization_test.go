package condition

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// TestSummarize: Ready is True only when every cluster holds the object; one cluster's failure
// keeps its own reason, several or a partial realisation read PartiallyRealized.
func TestSummarize(t *testing.T) {
	g := NewWithT(t)
	n := &fleetv1.VMNetwork{}
	ok := Realization{Cluster: "pve", Ready: true}
	bad := Realization{Cluster: "hv", Reason: fleetv1.UnsupportedReason, Message: "spec.type: no VXLAN"}
	g.Expect(Summarize(n, []Realization{ok})).To(Equal(RealizedEverywhere))
	g.Expect(conditions.IsTrue(n, fleetv1.ReadyCondition)).To(BeTrue())
	g.Expect(Summarize(n, []Realization{bad})).To(Equal(RealizedNowhere))
	g.Expect(conditions.GetReason(n, fleetv1.ReadyCondition)).To(Equal(fleetv1.UnsupportedReason))
	g.Expect(Summarize(n, []Realization{ok, bad})).To(Equal(RealizedPartly))
	c := conditions.Get(n, fleetv1.ReadyCondition)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(fleetv1.PartiallyRealizedReason))
	g.Expect(c.Message).To(Equal("on pve; not on hv: spec.type: no VXLAN"))
}

func TestHypervisorReason(t *testing.T) {
	g := NewWithT(t)
	for class, want := range map[error]string{
		hypervisor.ErrNotOwned:    fleetv1.NotOwnedReason,
		hypervisor.ErrUnsupported: fleetv1.UnsupportedReason,
		hypervisor.ErrInvalid:     fleetv1.UnsupportedReason,
		hypervisor.ErrBusy:        fleetv1.VMsAttachedReason,
		hypervisor.ErrTransient:   fleetv1.HypervisorUnavailableReason,
	} {
		g.Expect(HypervisorReason(hypervisor.Errorf(class, "op", "x"))).To(Equal(want), fmt.Sprint(class))
	}
}
