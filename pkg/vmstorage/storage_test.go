package vmstorage

import (
	"testing"

	. "github.com/onsi/gomega"

	hfv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

const gib = int64(1) << 30

// TestRoom: the room on a node is the reported free space less the disks not shown yet, and
// never more than the size less every disk placed there, whatever the reading missed.
func TestRoom(t *testing.T) {
	g := NewWithT(t)
	st := &hfv1.VMStorage{}
	rz := hfv1.VMStorageRealization{Nodes: []hfv1.VMStorageNode{
		{Node: "pve1", Active: true, TotalBytes: 70 * gib, AvailableBytes: 70 * gib},
		{Node: "pve2", Active: false, TotalBytes: 70 * gib, AvailableBytes: 70 * gib},
	}}
	c := Candidate{Storage: st, Realization: rz}
	g.Expect(c.Room("pve1")).To(Equal(70 * gib))
	g.Expect(c.Room("pve2")).To(BeNumerically("<", 0), "an inactive node has no room")
	g.Expect(c.Room("pve3")).To(BeNumerically("<", 0), "nor a node without the storage")

	// Two 32 GiB clones placed; a reading taken while they ran shows neither.
	c.PendingBytes = map[string]int64{"pve1": 32 * gib}
	c.CommittedBytes = map[string]int64{"pve1": 64 * gib}
	g.Expect(c.Room("pve1")).To(Equal(6*gib), "bounded by the size less the disks placed")
	_, ok := Choose([]Candidate{c}, "pve1", 32*gib)
	g.Expect(ok).To(BeFalse())
	g.Expect(NodesWithRoom([]Candidate{c}, 32*gib)).To(BeEmpty())

	// Foreign data fills the storage: the reported free space decides.
	c.Realization.Nodes[0].AvailableBytes = 10 * gib
	c.PendingBytes, c.CommittedBytes = nil, nil
	g.Expect(c.Room("pve1")).To(Equal(10 * gib))
	g.Expect(NodesWithRoom([]Candidate{c}, 8*gib)).To(Equal([]string{"pve1"}))
}
