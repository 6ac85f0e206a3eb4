package hyperv

import (
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

const gib = int64(1) << 30

// storageEnv is two hosts with storage "fast" defined on both, its folder on hv1's 500 GiB D:.
func storageEnv(t *testing.T) *testEnv {
	t.Helper()
	env := newEnv(t, hvsim.HyperVConfig{})
	if err := env.hv.AddVolume("hv1", `D:\`, 500); err != nil {
		t.Fatal(err)
	}
	if err := env.p.EnsureStorage(testCtx(t), folderStorage()); err != nil {
		t.Fatal(err)
	}
	return env
}

func usedOnHV1(t *testing.T, env *testEnv, name string) int64 {
	t.Helper()
	st, err := env.p.StorageState(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Nodes[0].UsedBytes
}

func fullCloneSpec(name, claimID, storage string) hypervisor.CloneSpec {
	return hypervisor.CloneSpec{
		Source: hypervisor.VMRef{Node: "hv1", ID: templateDisk}, Target: hypervisor.VMRef{Node: "hv1"}, Name: name, Full: true, Storage: storage,
		Owner: hypervisor.Ownership{Cluster: testCluster, ClaimNamespace: "team-a", ClaimName: name, ClaimID: claimID},
	}
}

// TestFullCloneAndExtraDisksOnStorage: a full clone onto a storage copies the template's disk into
// the storage's folder, named by the VM's GUID, and the storage's volume shows it used; an extra
// disk naming the storage is made there too, one naming none in the VHD folder. A retried clone or
// Configure makes nothing more. Deleting the VM removes every one of its disks, wherever they are,
// so the storage holds nothing and can go.
func TestFullCloneAndExtraDisksOnStorage(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env := storageEnv(t)
	empty := usedOnHV1(t, env, "fast")

	spec := fullCloneSpec("db-0", "claimdb0", "fast")
	ref, _, err := env.p.Clone(ctx, spec)
	g.Expect(err).NotTo(HaveOccurred())
	boot := storageFolder + `\hyperfleet-` + ref.ID + `.vhdx`
	g.Expect(simVM(env, "hv1", ref.ID).Disks).To(Equal([]string{boot}))
	copied, ok := env.hv.File("hv1", boot)
	g.Expect(ok).To(BeTrue())
	g.Expect(copied.Parent).To(BeEmpty(), "a full copy, not a differencing disk")
	g.Expect(copied.Size).To(Equal(20 * gib))
	g.Expect(usedOnHV1(t, env, "fast")).To(Equal(empty + 20*gib))

	again, _, err := env.p.Clone(ctx, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(ref), "the retry finds the VM the first clone made")
	g.Expect(env.hv.VMs("hv1")).To(HaveLen(1))

	config := hypervisor.ConfigSpec{Cores: 2, MemoryMiB: 2048, Disk: &hypervisor.DiskSpec{SizeGiB: 30},
		ExtraDisks: []hypervisor.ExtraDisk{{Name: "data", SizeGiB: 10, Storage: "fast"}, {Name: "wal", SizeGiB: 1}},
		CloudInit:  &hypervisor.CloudInitData{UserData: "#cloud-config\n", MetaData: "instance-id: db-0\n"}}
	for range 2 {
		_, err = env.p.Configure(ctx, ref, config)
		g.Expect(err).NotTo(HaveOccurred())
	}
	data := storageFolder + `\hyperfleet-` + ref.ID + `-data.vhdx`
	wal := disksDir + `\hyperfleet-` + ref.ID + `-wal.vhdx`
	vm := simVM(env, "hv1", ref.ID)
	g.Expect(vm.Disks).To(Equal([]string{boot, data, wal}))
	g.Expect(vm.DiskLUNs).To(Equal([]int{0, 1, 2}))
	copied, _ = env.hv.File("hv1", boot)
	g.Expect(copied.Size).To(Equal(30*gib), "the boot disk grown is the copy")
	_, items := env.hv.Directory("hv1", storageFolder)
	g.Expect(items).To(ConsistOf(".hyperfleet-owner", "hyperfleet-"+ref.ID+".vhdx", "hyperfleet-"+ref.ID+"-data.vhdx"))
	g.Expect(usedOnHV1(t, env, "fast")).To(BeNumerically(">=", empty+40*gib))

	_, err = env.p.Delete(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	for _, gone := range []string{boot, data, wal} {
		_, ok := env.hv.File("hv1", gone)
		g.Expect(ok).To(BeFalse(), gone)
	}
	_, ok = env.hv.File("hv1", templateDisk)
	g.Expect(ok).To(BeTrue(), "the template's disk is never deleted")
	g.Expect(usedOnHV1(t, env, "fast")).To(Equal(empty))
	g.Expect(env.p.DeleteStorage(ctx, "fast", folderStorage().Owner)).To(Succeed(), "the VM left nothing in the folder")
}

// TestFullCloneWithoutStorage: a full clone naming no storage copies the template's disk into the
// VHD folder; deleting the VM removes the copy and leaves the template's disk.
func TestFullCloneWithoutStorage(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	ref, _, err := env.p.Clone(ctx, fullCloneSpec("db-1", "claimdb1", ""))
	g.Expect(err).NotTo(HaveOccurred())
	boot := disksDir + `\hyperfleet-` + ref.ID + `.vhdx`
	g.Expect(simVM(env, "hv1", ref.ID).Disks).To(Equal([]string{boot}))
	f, _ := env.hv.File("hv1", boot)
	g.Expect(f.Parent).To(BeEmpty())

	_, err = env.p.Delete(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	_, ok := env.hv.File("hv1", boot)
	g.Expect(ok).To(BeFalse())
	_, ok = env.hv.File("hv1", templateDisk)
	g.Expect(ok).To(BeTrue())
}

// TestFullCloneCutShortIsCompleted: a full clone whose call ended after the VM was made and
// marked but before its copy was attached (the half-made copy left in the folder) gets the copy
// on the retry, and the VM is not made twice.
func TestFullCloneCutShortIsCompleted(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env := storageEnv(t)
	spec := fullCloneSpec("db-2", "claimdb2", "fast")
	id, err := env.hv.AddVM("hv1", "db-2", env.p.notes(spec.Owner, ""), false)
	g.Expect(err).NotTo(HaveOccurred())
	boot := storageFolder + `\hyperfleet-` + id + `.vhdx`
	g.Expect(env.hv.WriteFile("hv1", boot, []byte("half-copied"))).To(Succeed())

	ref, _, err := env.p.Clone(ctx, spec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ref.ID).To(Equal(id))
	g.Expect(env.hv.VMs("hv1")).To(HaveLen(1))
	g.Expect(simVM(env, "hv1", id).Disks).To(Equal([]string{boot}))
	f, _ := env.hv.File("hv1", boot)
	g.Expect(f.Size).To(Equal(20 * gib))
}

// TestStorageRefusals: a storage for a linked clone, and a storage this HypervisorCluster has not
// defined on the VM's host (unknown, another installation's, or defined on another host only),
// are refused with a clear error before anything is made.
func TestStorageRefusals(t *testing.T) {
	ctx := testCtx(t)
	env := storageEnv(t)
	g := NewWithT(t)
	other := env.provider(t, otherInstall, testCluster)
	g.Expect(other.EnsureStorage(ctx, hypervisor.StoragePool{Name: "theirs", Type: "directory", Path: `D:\Other\theirs`})).To(Succeed())
	g.Expect(env.p.EnsureStorage(ctx, hypervisor.StoragePool{Name: "remote", Type: "directory", Path: `D:\HyperFleet\remote`, Nodes: []string{"hv2"}})).To(Succeed())
	ref := cloneBare(t, env, "db-3", "claimdb3")
	before := simVM(env, "hv1", ref.ID)

	linked := fullCloneSpec("db-4", "claimdb4", "fast")
	linked.Full = false
	_, _, err := env.p.Clone(ctx, linked)
	g.Expect(err).To(MatchError(hypervisor.ErrInvalid))
	g.Expect(err.Error()).To(ContainSubstring("a storage can only be chosen for a full clone"))
	g.Expect(env.hv.Calls()["hv1/New-HFVM"]).To(Equal(1), "refused before the host was asked")

	for _, tc := range []struct{ storage, says string }{
		{"nope", "storage nope is not defined on HV1"},
		{"theirs", "storage theirs is not defined on HV1"},
		{"remote", "storage remote is not defined on HV1"},
	} {
		t.Run(tc.storage, func(t *testing.T) {
			g := NewWithT(t)
			files := env.hv.Files("hv1")
			_, _, err := env.p.Clone(ctx, fullCloneSpec("db-5", "claimdb5", tc.storage))
			g.Expect(err).To(MatchError(hypervisor.ErrNotFound))
			g.Expect(err.Error()).To(ContainSubstring(tc.says))
			g.Expect(env.hv.VMs("hv1")).To(HaveLen(1), "no VM made")

			_, err = env.p.Configure(ctx, ref, hypervisor.ConfigSpec{ExtraDisks: []hypervisor.ExtraDisk{
				{Name: "data", SizeGiB: 1, Storage: "fast"}, {Name: "logs", SizeGiB: 1, Storage: tc.storage}}})
			g.Expect(err).To(MatchError(hypervisor.ErrNotFound))
			g.Expect(err.Error()).To(ContainSubstring(tc.says))
			g.Expect(simVM(env, "hv1", ref.ID).Disks).To(Equal(before.Disks), "no disk made, not even the one on a known storage")
			g.Expect(env.hv.Files("hv1")).To(Equal(files))
		})
	}
}

// TestDeleteFindsDisksLeftOnStorage: deleting a VM whose full copy and extra disk were made in a
// storage's folder but never attached (their calls were cut short) removes them too; a file of
// another VM's there stays.
func TestDeleteFindsDisksLeftOnStorage(t *testing.T) {
	g := NewWithT(t)
	ctx := testCtx(t)
	env := storageEnv(t)
	spec := fullCloneSpec("db-6", "claimdb6", "fast")
	id, err := env.hv.AddVM("hv1", "db-6", env.p.notes(spec.Owner, ""), false)
	g.Expect(err).NotTo(HaveOccurred())
	left := []string{storageFolder + `\hyperfleet-` + id + `.vhdx`, storageFolder + `\hyperfleet-` + id + `-data.vhdx`}
	foreign := storageFolder + `\hyperfleet-0d5a1c9e-3f7b-4c2a-9e61-5b8d4a2f7c10.vhdx`
	for _, f := range append(left, foreign) {
		g.Expect(env.hv.WriteFile("hv1", f, []byte("half-made"))).To(Succeed())
	}

	_, err = env.p.Delete(ctx, hypervisor.VMRef{Node: "hv1", ID: id})
	g.Expect(err).NotTo(HaveOccurred())
	for _, gone := range left {
		_, ok := env.hv.File("hv1", gone)
		g.Expect(ok).To(BeFalse(), gone)
	}
	_, ok := env.hv.File("hv1", foreign)
	g.Expect(ok).To(BeTrue())
}
