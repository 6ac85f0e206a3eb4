package pvesim

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestSmoke(t *testing.T) {
	g := NewWithT(t)
	s := StartForTest(t, Config{})
	c := tokenClient(t, s)
	ctx := testCtx(t)
	v, err := c.Version(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Release).To(Equal("9.1"))
	node, err := c.Node(ctx, "pve1")
	g.Expect(err).NotTo(HaveOccurred())
	vm, err := node.VirtualMachine(ctx, 9000)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vm.Name).To(Equal("ubuntu-2404-runner"))
	g.Expect(bool(vm.Template)).To(BeTrue())
}
