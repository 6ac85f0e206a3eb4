package hyperv

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"regexp"

	"github.com/hyperfleet-io/hyperfleet/pkg/cloudinit"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// vmName is what a VM HyperFleet creates may be called (a Kubernetes name): it also starts its
// differencing disk's file name.
var vmName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// maxVMName is Hyper-V's limit on a VM's name.
const maxVMName = 100

// hyperVName fits a name into Hyper-V's limit, keeping long names distinct by a hash.
func hyperVName(name string) string {
	if len(name) <= maxVMName {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:maxVMName-9] + "-" + hex.EncodeToString(sum[:4])
}

// diskName is the clone's differencing disk: the VM's name and a hash of its owner and claim, so
// claims of one name in two namespaces, or two installations, never share a file.
func (p *Provider) diskName(name string, o hypervisor.Ownership) string {
	sum := sha256.Sum256([]byte(p.ownerTag + "\x00" + o.ClaimID))
	return hyperVName(name)[:min(len(hyperVName(name)), 64)] + "-" + hex.EncodeToString(sum[:6]) + ".vhdx"
}

// newVMInput is New-HFVM's argument.
type newVMInput struct {
	Name string
	// DiskName is a linked clone's differencing disk; a full copy is named by the VM's GUID.
	DiskName           string `json:",omitempty"`
	ParentPath         string
	VHDDirectory       string
	VMDirectory        string
	Notes              string
	Cores              int
	MemoryMiB          int
	SwitchName         string
	VlanID             int `json:"VlanId"`
	SecureBootTemplate string
	Expect             expectation
	// Full copies the template's disk instead of making a differencing disk on it: into the
	// folder of the directory storage Storage, found in the host's storage index under
	// StorageIndex, or into VHDDirectory when Storage is empty.
	Full         bool   `json:",omitempty"`
	Storage      string `json:",omitempty"`
	StorageIndex string `json:",omitempty"`
}

// setVMInput is Set-HFVM's argument.
type setVMInput struct {
	ID            string `json:"Id"`
	Expect        expectation
	Cores         int
	MemoryMiB     int
	SwitchName    string
	VlanID        int `json:"VlanId"`
	Notes         string
	DiskSizeBytes int64
	SeedPath      string
	// SeedArchivePath is the gzip-compressed seed to unpack to SeedPath; SeedSHA256 the unpacked
	// seed's hash.
	SeedArchivePath string
	SeedSHA256      string
}

// Clone makes a generation 2 VM on spec.Target.Node from the template's disk, stamped with
// spec.Owner in its Notes: on a differencing disk (Hyper-V's linked clone), or with spec.Full on a
// copy of the disk, in the folder of the directory storage spec.Storage or else in the VHD folder.
// The host finds a storage's folder in its storage index, so a storage this host does not record
// is refused (ErrNotFound) before anything is made. Hyper-V assigns the VM's ID, so the new
// reference is returned; the call is synchronous (empty TaskID), a full copy included, so the
// copy must end within Config.Timeout. A retry with the same name and claim finds the VM the
// first attempt made, and makes the copy again when that attempt was cut short before it.
func (p *Provider) Clone(ctx context.Context, spec hypervisor.CloneSpec) (hypervisor.VMRef, hypervisor.TaskID, error) {
	op := "clone " + spec.Name + " on " + spec.Target.Node
	if spec.Storage != "" && !spec.Full {
		return hypervisor.VMRef{}, "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "a storage can only be chosen for a full clone")
	}
	if !vmName.MatchString(spec.Name) {
		return hypervisor.VMRef{}, "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "VM name %q: use letters, digits, '.', '_' and '-' (it names the VM's disk file)", spec.Name)
	}
	if spec.Owner.ClaimID == "" {
		return hypervisor.VMRef{}, "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "a Hyper-V clone needs its claim ID: it is how a retry finds the VM Hyper-V named")
	}
	if spec.Storage != "" && !storageNameRe.MatchString(spec.Storage) {
		return hypervisor.VMRef{}, "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "%q cannot name a Hyper-V directory storage", spec.Storage)
	}
	h := p.hosts[spec.Target.Node]
	if h == nil {
		return hypervisor.VMRef{}, "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "host %q is not one of this cluster's hosts %v", spec.Target.Node, p.names)
	}
	if spec.Source.Node != "" && spec.Source.Node != spec.Target.Node {
		return hypervisor.VMRef{}, "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "template %s is on another host: a clone is made from the template's disk on the same host", spec.Source)
	}
	parent, memoryMiB, err := p.parentDisk(ctx, op, h, spec.Source)
	if err != nil {
		return hypervisor.VMRef{}, "", err
	}
	if memoryMiB <= 0 {
		memoryMiB = DefaultMemoryMiB
	}
	in := newVMInput{
		Name: hyperVName(spec.Name), ParentPath: parent, VHDDirectory: p.cfg.VHDDirectory, VMDirectory: p.cfg.VMDirectory,
		Notes: p.notes(spec.Owner, ""), MemoryMiB: memoryMiB, SecureBootTemplate: p.cfg.SecureBootTemplate,
		Expect: p.expect(spec.Owner.ClaimID), Full: spec.Full,
	}
	if spec.Full {
		in.Storage = spec.Storage
		if spec.Storage != "" {
			in.StorageIndex = p.cfg.StorageIndex
		}
	} else {
		in.DiskName = p.diskName(spec.Name, spec.Owner)
	}
	var out wireOneVM
	if err := h.call(ctx, op, fnNewVM, in, &out); err != nil {
		return hypervisor.VMRef{}, "", err
	}
	return hypervisor.VMRef{Node: h.name, ID: lowerGUID(out.VM.ID)}, "", nil
}

// seedPath is the VM's seed ISO on its host, named by the VM's GUID.
func (p *Provider) seedPath(ref hypervisor.VMRef) string {
	return p.cfg.SeedDirectory + `\hyperfleet-` + lowerGUID(ref.ID) + "-cidata.iso"
}

// Configure applies CPU, memory, switch and VLAN (or every network adapter, for spec.NICs, with
// its network's port ACLs and bandwidth cap), the extra disks, the Notes (description, ownership and tags), disk growth and the seed ISO to an
// owned VM that is off; what Hyper-V has no equivalent for is refused before anything changes
// (see hardware.go). The seed (a NoCloud ISO, label cidata, that cloud-init and cloudbase-init
// both read) is built here and uploaded gzip-compressed (the image is mostly zeros: 57 KB become
// under 1 KB, one command line instead of about twenty); the module unpacks it next to the VM's
// other seeds and checks its SHA-256 before the VM takes it.
func (p *Provider) Configure(ctx context.Context, ref hypervisor.VMRef, spec hypervisor.ConfigSpec) (hypervisor.TaskID, error) {
	op := opName("configure", ref)
	disks, adapters, err := hardwareInputs(op, spec)
	if err != nil {
		return "", err
	}
	policies, err := policyInputs(op, spec.NICs)
	if err != nil {
		return "", err
	}
	h, err := p.hostOf(op, ref)
	if err != nil {
		return "", err
	}
	// The read proves ownership before anything is uploaded and gives the claim for the Notes;
	// the module checks again before it changes the VM.
	w, err := h.getVM(ctx, op, ref.ID)
	if err != nil {
		return "", err
	}
	owner := p.ownerFromNotes(w.Notes)
	if owner == nil {
		return "", p.notOwned(op, ref, w.Name)
	}
	in := setVMInput{ID: ref.ID, Expect: p.expect(owner.ClaimID), Cores: spec.Cores, MemoryMiB: spec.MemoryMiB,
		Notes: p.notes(*owner, spec.Description, spec.Tags...)}
	if n := spec.Network; n != nil && len(adapters) == 0 {
		in.SwitchName, in.VlanID = networkName(n), n.VLAN
	}
	if spec.Disk != nil && spec.Disk.SizeGiB > 0 {
		in.DiskSizeBytes = int64(spec.Disk.SizeGiB) << 30
	}
	// Adapters and extra disks before Set-HFVM: the disks take their SCSI locations after the
	// boot disk before the seed's DVD drive takes the next free one.
	if err := p.applyHardware(ctx, op, h, ref.ID, in.Expect, disks, adapters); err != nil {
		return "", err
	}
	if err := applyPolicies(ctx, op, h, ref.ID, in.Expect, policies); err != nil {
		return "", err
	}
	if ci := spec.CloudInit; ci != nil {
		iso, err := cloudinit.NoCloudISO(ci.UserData, ci.MetaData, ci.NetworkConfig, ci.VendorData)
		if err != nil {
			return "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "build the seed ISO: %v", err)
		}
		archive, err := gzipped(iso)
		if err != nil {
			return "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "compress the seed ISO: %v", err)
		}
		sum := sha256.Sum256(iso)
		in.SeedPath, in.SeedArchivePath, in.SeedSHA256 = p.seedPath(ref), p.seedPath(ref)+".gz", hex.EncodeToString(sum[:])
		if err := h.upload(ctx, op, in.SeedArchivePath, archive); err != nil {
			return "", err
		}
	}
	return "", h.call(ctx, op, fnSetVM, in, nil)
}

func (p *Provider) notOwned(op string, ref hypervisor.VMRef, name string) error {
	return hypervisor.Errorf(hypervisor.ErrNotOwned, op,
		"VM %s (%q) does not carry this installation's ownership block (owner %s) in its Notes", ref, name, p.ownerTag)
}

// gzipped compresses data.
func gzipped(data []byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
