package proxmox

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestAllVMsShowsForeignVMsWithoutOwner lists every VM in one call: this installation's with their
// owner, foreign VMs and another cluster's without one, templates not at all.
func TestAllVMsShowsForeignVMsWithoutOwner(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	mine := cloneOwned(t, p, 600, ownerFor(clusterA, "one"))
	theirs := cloneOwned(t, newTestProvider(t, sim, clusterB), 601, ownerFor(clusterB, "theirs"))

	sim.ResetRequests()
	vms, err := p.AllVMs(testCtx(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sim.Requests()).To(Equal(map[string]int{"GET /cluster/resources": 1}))
	byName := map[string]hypervisor.VM{}
	for _, vm := range vms {
		byName[vm.Name] = vm
		g.Expect(vm.Template).To(BeFalse())
	}
	for _, foreign := range []string{"pbs-backup", "gitlab", "dev-sandbox", "win-build"} {
		g.Expect(byName).To(HaveKey(foreign))
		g.Expect(byName[foreign].Owner).To(BeNil(), foreign)
	}
	g.Expect(byName).NotTo(HaveKey("ubuntu-2404-runner"), "templates are not listed")
	var sawMine, sawTheirs bool
	for _, vm := range vms {
		switch vm.Ref {
		case mine:
			sawMine = true
			g.Expect(vm.Owner).NotTo(BeNil())
			g.Expect(vm.Owner.ClaimName).To(Equal("one"))
		case theirs:
			sawTheirs = true
			g.Expect(vm.Owner).To(BeNil(), "another cluster's VM is foreign here")
		}
	}
	g.Expect(sawMine && sawTheirs).To(BeTrue())
	g.Expect(byName["gitlab"].State).To(Equal(hypervisor.PowerStateRunning))
	g.Expect(byName["dev-sandbox"].State).To(Equal(hypervisor.PowerStateStopped))
}
