package claimplacement

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/placement"
)

// TestHostsAndReservations: a host's free memory is what the hypervisor reports less what claims
// placed there but not yet running hold (the claim asking is left out, and a claim with no memory
// set counts 2 GiB); labels and maintenance come from spec.hosts, and hosts outside allowedNodes
// are unavailable with the reason.
func TestHostsAndReservations(t *testing.T) {
	g := NewWithT(t)
	claim := func(uid, node string, step infrav1.ProvisioningStep, mem int32) infrav1.MachineClaim {
		c := infrav1.MachineClaim{ObjectMeta: metav1.ObjectMeta{UID: types.UID("uid-" + uid)}}
		c.Status.Node, c.Status.CompletedStep, c.Spec.MemoryMiB = node, step, mem
		return c
	}
	claims := []infrav1.MachineClaim{
		claim("self", "pve1", "", 4096),                     // the claim asking: not counted
		claim("cloning", "pve1", "", 1024),                  // placed, not running: counted
		claim("default", "pve2", "", 0),                     // no memory set: 2 GiB
		claim("running", "pve1", infrav1.StepStarted, 8192), // running: the node's usage shows it
		claim("unplaced", "", "", 4096),                     // no host yet
	}
	reserved := ReservedBy(claims, "uid-self")
	g.Expect(reserved).To(Equal(map[string]int{"pve1": 1024, "pve2": 2048}))

	hc := &infrav1.HypervisorCluster{}
	hc.Spec.Hosts = []infrav1.HypervisorHost{{Name: "pve1", Labels: map[string]string{"gpu": "a100"}}, {Name: "pve2", Maintenance: true}}
	hc.Spec.AllowedNodes = []string{"pve1", "pve2"}
	nodes := []hypervisor.Node{{Name: "pve1", Online: true, MemoryFree: 16 << 30}, {Name: "pve2", Online: true, MemoryFree: 8 << 30},
		{Name: "pve3", Online: true, MemoryFree: 64 << 30}}
	g.Expect(Hosts(hc, nodes, reserved)).To(Equal([]placement.Host{
		{Name: "pve1", Online: true, Labels: map[string]string{"gpu": "a100"}, FreeMiB: 16384 - 1024},
		{Name: "pve2", Online: true, Maintenance: true, FreeMiB: 8192 - 2048},
		{Name: "pve3", Online: true, FreeMiB: 65536, Unavailable: "not in the HypervisorCluster's allowedNodes"},
	}))
}

// TestPolicyNamesTheBadSelector: a selector the API server accepted but labels cannot parse is
// refused with the field it came from.
func TestPolicyNamesTheBadSelector(t *testing.T) {
	g := NewWithT(t)
	c := &infrav1.MachineClaim{}
	c.Spec.Placement = &infrav1.PlacementSpec{AntiAffinity: []metav1.LabelSelector{
		{MatchLabels: map[string]string{"app": "db"}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Sometimes"}}},
	}}
	_, err := Policy(c, 2048)
	g.Expect(err).To(MatchError(ContainSubstring("spec.placement.antiAffinity[1]")))

	c.Spec.Placement.AntiAffinity = c.Spec.Placement.AntiAffinity[:1]
	p, err := Policy(c, 2048)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.MemoryMiB).To(Equal(2048))
	g.Expect(p.AntiAffinity).To(HaveLen(1))
	g.Expect(p.AntiAffinity[0].String()).To(Equal("app=db"))
}
