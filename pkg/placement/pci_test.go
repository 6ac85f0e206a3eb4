package placement

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestPCIReasons(t *testing.T) {
	g := NewWithT(t)
	mappings := map[string][]string{"gpu": {"pve1", "pve3"}, "nic": {"pve3"}}
	nodes := []string{"pve1", "pve2", "pve3"}

	g.Expect(PCIReasons(nodes, mappings, nil)).To(BeEmpty(), "a VM without devices fits everywhere")
	g.Expect(PCIReasons(nodes, mappings, []string{"gpu"})).To(Equal(map[string]string{"pve2": "has no device for PCI mapping gpu"}))
	g.Expect(PCIReasons(nodes, mappings, []string{"gpu", "nic"})).To(Equal(map[string]string{
		"pve1": "has no device for PCI mapping nic",
		"pve2": "has no device for PCI mapping gpu, nic",
	}), "every mapping must have a device on the node")
	g.Expect(PCIReasons(nodes, mappings, []string{"fpga"})).To(HaveLen(3), "a mapping nobody lists fits nowhere")
}
