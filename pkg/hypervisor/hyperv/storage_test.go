package hyperv

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

const storageFolder = `D:\HyperFleet\fast`

func folderStorage() hypervisor.StoragePool {
	return hypervisor.StoragePool{Name: "fast", Owner: hypervisor.Ownership{Cluster: testCluster}, Type: "directory", Path: storageFolder, Content: []string{"images"}}
}

// TestEnsureAndDeleteStorage: the folder is made on every host with its mark, recorded, and its
// volume read; a second ensure changes nothing; deletion refuses while a disk is left in it and
// then removes the folder and the record; a deleted storage is not found.
func TestEnsureAndDeleteStorage(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	g.Expect(env.hv.AddVolume("hv1", `D:\`, 500)).To(Succeed())
	sp := folderStorage()
	for range 2 {
		g.Expect(env.p.EnsureStorage(testCtx(t), sp)).To(Succeed())
	}
	for _, h := range env.hosts {
		ok, items := env.hv.Directory(h, storageFolder)
		g.Expect(ok).To(BeTrue())
		g.Expect(items).To(Equal([]string{".hyperfleet-owner"}))
		mark, _ := env.hv.File(h, storageFolder+`\.hyperfleet-owner`)
		g.Expect(string(mark.Data)).To(ContainSubstring("```hyperfleet-storage\nmanaged-by: hyperfleet\ninstallation: " + testInstallation))
	}
	st, err := env.p.StorageState(testCtx(t), "fast")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Shared).To(BeFalse())
	g.Expect(st.Nodes).To(HaveLen(2))
	g.Expect(st.Nodes[0]).To(And(HaveField("Node", "hv1"), HaveField("Active", true), HaveField("TotalBytes", int64(500)<<30)))
	g.Expect(st.Nodes[0].AvailableBytes + st.Nodes[0].UsedBytes).To(Equal(st.Nodes[0].TotalBytes))
	g.Expect(st.Nodes[1]).To(And(HaveField("Node", "hv2"), HaveField("Active", true), HaveField("TotalBytes", int64(1)<<40)))

	g.Expect(env.hv.AttachDisk("hv1", mustAddVM(t, env), storageFolder+`\data.vhdx`, 10)).To(Succeed())
	err = env.p.DeleteStorage(testCtx(t), "fast", sp.Owner)
	g.Expect(err).To(MatchError(hypervisor.ErrBusy))
	g.Expect(err.Error()).To(ContainSubstring("data.vhdx"))
	_, ok := env.hv.File("hv1", storageFolder+`\data.vhdx`)
	g.Expect(ok).To(BeTrue(), "no data is deleted")
	g.Expect(env.hv.RemoveFile("hv1", storageFolder+`\data.vhdx`)).To(Succeed())

	for range 2 {
		g.Expect(env.p.DeleteStorage(testCtx(t), "fast", sp.Owner)).To(Succeed())
	}
	for _, h := range env.hosts {
		ok, _ := env.hv.Directory(h, storageFolder)
		g.Expect(ok).To(BeFalse())
	}
	_, err = env.p.StorageState(testCtx(t), "fast")
	g.Expect(err).To(MatchError(hypervisor.ErrNotFound))
}

func mustAddVM(t *testing.T, env *testEnv) string {
	t.Helper()
	id, err := env.hv.AddVM("hv1", "operator-vm", "", false)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestAdoptedStorage: an existing folder is adopted on the listed node only, never written to,
// and deleting the storage forgets it and leaves the folder; a folder that is not there cannot
// be adopted. A folder on a cluster shared volume is shared.
func TestAdoptedStorage(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	csv := `C:\ClusterStorage\Volume1\vms`
	g.Expect(env.hv.AddDirectory("hv2", csv)).To(Succeed())
	g.Expect(env.hv.AddVolume("hv2", `C:\ClusterStorage\Volume1`, 2048)).To(Succeed())
	sp := hypervisor.StoragePool{Name: "vms", Adopt: true, Type: "directory", Path: csv, Nodes: []string{"hv2"}}
	g.Expect(env.p.EnsureStorage(testCtx(t), sp)).To(Succeed())
	_, items := env.hv.Directory("hv2", csv)
	g.Expect(items).To(BeEmpty(), "an adopted folder is not marked")
	st, err := env.p.StorageState(testCtx(t), "vms")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Shared).To(BeTrue())
	g.Expect(st.Nodes).To(Equal([]hypervisor.StorageNodeState{{Node: "hv2", Active: true, TotalBytes: 2048 << 30, AvailableBytes: 2048 << 30}}))
	g.Expect(env.p.DeleteStorage(testCtx(t), "vms", sp.Owner)).To(Succeed())
	ok, _ := env.hv.Directory("hv2", csv)
	g.Expect(ok).To(BeTrue(), "an adopted folder stays")

	sp.Nodes = nil
	err = env.p.EnsureStorage(testCtx(t), sp)
	g.Expect(err).To(MatchError(hypervisor.ErrNotFound), "hv1 has no such folder")
}

// TestForeignFolderIsNotOwned: a folder of the storage's path without this installation's mark
// (another installation's, or an operator's with data in it) is refused with ErrNotOwned and left
// as it was.
func TestForeignFolderIsNotOwned(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	sp := folderStorage()
	other := env.provider(t, otherInstall, testCluster)
	g.Expect(other.EnsureStorage(testCtx(t), sp)).To(Succeed())
	before, _ := env.hv.File("hv1", storageFolder+`\.hyperfleet-owner`)
	err := env.p.EnsureStorage(testCtx(t), sp)
	g.Expect(err).To(MatchError(hypervisor.ErrNotOwned))
	after, _ := env.hv.File("hv1", storageFolder+`\.hyperfleet-owner`)
	g.Expect(after).To(Equal(before))
	g.Expect(env.p.DeleteStorage(testCtx(t), "fast", sp.Owner)).To(Succeed(), "this installation recorded nothing: nothing to delete")
	ok, _ := env.hv.Directory("hv1", storageFolder)
	g.Expect(ok).To(BeTrue())
	_, err = env.p.StorageState(testCtx(t), "fast")
	g.Expect(err).To(MatchError(hypervisor.ErrNotFound))

	// The mark replaced behind HyperFleet's back: its own record no longer proves the folder.
	g.Expect(other.DeleteStorage(testCtx(t), "fast", sp.Owner)).To(Succeed())
	g.Expect(env.p.EnsureStorage(testCtx(t), sp)).To(Succeed())
	g.Expect(env.hv.WriteFile("hv1", storageFolder+`\.hyperfleet-owner`, []byte("mine now"))).To(Succeed())
	g.Expect(env.p.DeleteStorage(testCtx(t), "fast", sp.Owner)).To(MatchError(hypervisor.ErrNotOwned))
	ok, _ = env.hv.Directory("hv1", storageFolder)
	g.Expect(ok).To(BeTrue())
	for _, h := range env.hosts {
		g.Expect(env.hv.ForeignStatements(h)).To(BeEmpty())
	}
}

// TestStorageGaps: other types, encryption, shares and other content are refused with a reason.
func TestStorageGaps(t *testing.T) {
	p := &Provider{cfg: Config{InstallationID: testInstallation, Cluster: testCluster}, ownerTag: OwnerTag(testInstallation, testCluster), hosts: map[string]*host{"hv1": nil}, names: []string{"hv1"}}
	for name, tc := range map[string]struct {
		mutate func(*hypervisor.StoragePool)
		field  string
		want   string
	}{
		"type":      {func(s *hypervisor.StoragePool) { s.Type = "zfspool"; s.Pool = "tank" }, "spec.type", "folders on a host volume"},
		"encrypted": {func(s *hypervisor.StoragePool) { s.Encrypted = true }, "spec.encrypted", "BitLocker encrypts whole volumes"},
		"content":   {func(s *hypervisor.StoragePool) { s.Content = []string{"iso"} }, "spec.content", "VM disks (images) only"},
		"share":     {func(s *hypervisor.StoragePool) { s.Path = `\\nas\vm\fast` }, "spec.path", "SMB share"},
		"relative":  {func(s *hypervisor.StoragePool) { s.Path = `fast` }, "spec.path", "not an absolute Windows path"},
		"name":      {func(s *hypervisor.StoragePool) { s.Path = `D:\other` }, "spec.storageName", "last element"},
		"node":      {func(s *hypervisor.StoragePool) { s.Nodes = []string{"hv9"} }, "spec.nodes", "not one of this cluster's hosts"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			sp := folderStorage()
			g.Expect(p.StorageGaps(sp)).To(BeEmpty())
			tc.mutate(&sp)
			g.Expect(p.StorageGaps(sp)).To(ContainElement(And(HaveField("Field", tc.field), HaveField("Reason", ContainSubstring(tc.want)))))
		})
	}
}
