package proxmox

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestStorageDefineAdoptDelete: a defined storage joins the installation's pool and reports its
// capacity per node; another installation can neither take nor delete it; an adopted storage is
// only read.
func TestStorageDefineAdoptDelete(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	other := newTestProvider(t, sim, clusterA, func(c *Config) { c.InstallationID = "fedcba9876543210" })
	ctx := testCtx(t)
	owner := hypervisor.Ownership{Cluster: clusterA}
	pool := hypervisor.StoragePool{Name: "fast", Owner: owner, Type: "dir", Path: "/srv/fast", Nodes: []string{"pve1", "pve2"},
		Content: []string{"images"}}

	g.Expect(p.EnsureStorage(ctx, pool)).To(Succeed())
	g.Expect(p.EnsureStorage(ctx, pool)).To(Succeed(), "again")
	defined, pools := sim.StorageDefined("fast")
	g.Expect(defined).To(BeTrue())
	g.Expect(pools).To(Equal([]string{p.storagePoolID()}))

	st, err := p.StorageState(ctx, "fast")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Shared).To(BeFalse())
	g.Expect(st.Nodes).To(HaveLen(2))
	g.Expect(st.Nodes[0]).To(Equal(hypervisor.StorageNodeState{Node: "pve1", Active: true, TotalBytes: 1 << 40, AvailableBytes: 1 << 40}))

	g.Expect(other.EnsureStorage(ctx, pool)).To(MatchError(hypervisor.ErrNotOwned))
	g.Expect(other.DeleteStorage(ctx, "fast", owner)).To(MatchError(hypervisor.ErrNotOwned))
	defined, _ = sim.StorageDefined("fast")
	g.Expect(defined).To(BeTrue(), "left as it was")

	// A storage someone defined in PVE: refused unless adopted; adopting only reads it.
	g.Expect(p.EnsureStorage(ctx, hypervisor.StoragePool{Name: "local-lvm", Owner: owner, Type: "lvmthin", Pool: "pve/data"})).
		To(MatchError(hypervisor.ErrNotOwned))
	sim.ResetRequests()
	g.Expect(p.EnsureStorage(ctx, hypervisor.StoragePool{Name: "local-lvm", Adopt: true})).To(Succeed())
	g.Expect(writes(sim.Requests())).To(BeEmpty())
	g.Expect(p.EnsureStorage(ctx, hypervisor.StoragePool{Name: "absent", Adopt: true})).To(MatchError(hypervisor.ErrNotFound))
	g.Expect(p.DeleteStorage(ctx, "local-lvm", owner)).To(MatchError(hypervisor.ErrNotOwned))

	g.Expect(p.DeleteStorage(ctx, "fast", owner)).To(Succeed())
	defined, pools = sim.StorageDefined("fast")
	g.Expect(defined).To(BeFalse())
	g.Expect(pools).To(BeEmpty())
	g.Expect(p.DeleteStorage(ctx, "fast", owner)).To(Succeed(), "nothing left is no error")
	_, err = p.StorageState(ctx, "fast")
	g.Expect(err).To(MatchError(hypervisor.ErrNotFound))
}

func TestStorageGaps(t *testing.T) {
	g := NewWithT(t)
	p := &Provider{}
	gaps := p.StorageGaps(hypervisor.StoragePool{Name: "x", Type: "dir", Path: "/x", Encrypted: true})
	g.Expect(gaps).To(HaveLen(1))
	g.Expect(gaps[0].Field).To(Equal("spec.encrypted"))
	g.Expect(gaps[0].Reason).To(ContainSubstring("Proxmox Backup Server"))
	g.Expect(p.StorageGaps(hypervisor.StoragePool{Name: "x", Type: "ceph"})).To(ConsistOf(HaveField("Field", "spec.type")))
	g.Expect(p.StorageGaps(hypervisor.StoragePool{Name: "x", Type: "zfspool", Pool: "tank"})).To(BeEmpty())
}

// TestReplication: a VM on ZFS is replicated and its status shows the sync; a VM on LVM thin is
// refused with PVE's words as invalid.
func TestReplication(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	ctx := testCtx(t)

	onLVM := cloneOwned(t, p, 450, ownerFor(clusterA, "lvm"))
	err := p.EnsureReplication(ctx, hypervisor.ReplicationJob{VM: onLVM, Target: "pve2", Schedule: "*/15"})
	g.Expect(err).To(MatchError(hypervisor.ErrInvalid))
	g.Expect(err.Error()).To(ContainSubstring("missing replicate feature on volume 'local-lvm:"))

	g.Expect(p.EnsureStorage(ctx, hypervisor.StoragePool{Name: "tank", Owner: hypervisor.Ownership{Cluster: clusterA},
		Type: "zfspool", Pool: "rpool/data"})).To(Succeed())
	onZFS := cloneOwned(t, p, 451, ownerFor(clusterA, "zfs"))
	g.Expect(sim.SetVMConfig(451, "scsi0", "tank:vm-451-disk-0,size=32G")).To(Succeed())
	job := hypervisor.ReplicationJob{VM: onZFS, Target: "pve2", Schedule: "*/15", RateMBps: 50}
	g.Expect(p.EnsureReplication(ctx, job)).To(Succeed())
	g.Expect(p.EnsureReplication(ctx, job)).To(Succeed(), "again")
	g.Eventually(func() time.Time {
		st, err := p.ReplicationState(ctx, onZFS)
		g.Expect(err).NotTo(HaveOccurred())
		return st.LastSync
	}).WithTimeout(5 * time.Second).ShouldNot(BeZero())

	job.Schedule = "*/5"
	g.Expect(p.EnsureReplication(ctx, job)).To(Succeed())

	_, err = p.ReplicationState(ctx, onLVM)
	g.Expect(err).To(MatchError(hypervisor.ErrNotFound))
	foreign := hypervisor.VMRef{Node: "pve3", ID: idOf(foreignStopped)}
	g.Expect(p.EnsureReplication(ctx, hypervisor.ReplicationJob{VM: foreign, Target: "pve1"})).To(MatchError(hypervisor.ErrNotOwned))
}
