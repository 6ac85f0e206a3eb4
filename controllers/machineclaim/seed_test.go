package machineclaim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/proxmox"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestSpentSeedIsRemoved: the VM's NoCloud ISO holds its join token. It stays while the token may
// still be redeemed (the VM needs it to attest), and is ejected and deleted from storage once the
// token is spent; the VM keeps running. Whoever reads the ISO storage or the VM's CD-ROM after that
// finds no token.
func TestSpentSeedIsRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim, ns, _ := startFleet(t)
	config := builder.NewBootstrapConfig("runner-seed", ns).Build()
	claim := capiMachineWithConfig(t, ns, config)

	var vmid int
	var iso string
	g.Eventually(func(g Gomega) {
		got := get(g, claim)
		vmid = vmidOf(got.Status.VMID)
		vm, ok := sim.VM(vmid)
		g.Expect(ok).To(BeTrue())
		g.Expect(vm.Status).To(Equal("running"))
		iso = strings.TrimSuffix(vm.Disks[proxmox.DefaultCloudInitDevice], ",media=cdrom")
		g.Expect(iso).To(HaveSuffix("-cloudinit.iso"))
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	node := get(g, claim).Status.Node
	data, ok := sim.StorageFile(node, iso)
	g.Expect(ok).To(BeTrue())
	g.Expect(len(data)).To(BeNumerically(">", 0))
	g.Consistently(func() bool { _, ok := sim.StorageFile(node, iso); return ok },
		2*time.Second, 200*time.Millisecond).Should(BeTrue(), "the seed stays while the token may be redeemed")

	// The bootstrap service records the token's redemption.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := &bootstrapv1.BootstrapConfig{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(config), got); err != nil {
			return err
		}
		now := metav1.Now()
		if got.Status.JoinToken != nil {
			got.Status.JoinToken.RedeemedTime = &now
		} else {
			got.Status.AttestedTime = &now
		}
		return env.Client.Status().Update(ctx, got)
	})).To(Succeed())

	g.Eventually(func(g Gomega) {
		_, ok := sim.StorageFile(node, iso)
		g.Expect(ok).To(BeFalse(), "the ISO is deleted from storage")
		vm, _ := sim.VM(vmid)
		g.Expect(vm.Disks[proxmox.DefaultCloudInitDevice]).To(Equal("none,media=cdrom"), "and ejected from the VM")
		g.Expect(get(g, claim).Status.CloudInitEjectedTime).NotTo(BeNil())
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	vm, ok := sim.VM(vmid)
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Status).To(Equal("running"), "the VM keeps running")
}
