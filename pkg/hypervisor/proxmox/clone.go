package proxmox

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Clone starts a clone of spec.Source to spec.Target and returns its UPID. The description block
// with the ownership is part of the clone request, so the VM is identifiable the moment the clone
// exists. Tags cannot be written until the clone task releases its lock; the next mutating call
// (normally Configure) writes them, and until then VM recognises the VM by its description.
func (p *Provider) Clone(ctx context.Context, spec hypervisor.CloneSpec) (hypervisor.VMRef, hypervisor.TaskID, error) {
	op := fmt.Sprintf("clone %s to %s", spec.Source, spec.Target)
	_, srcOK := parseVMID(spec.Source.ID)
	newID, dstOK := parseVMID(spec.Target.ID)
	if !srcOK || spec.Source.Node == "" || !dstOK {
		return hypervisor.VMRef{}, "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "source node/VMID and target VMID are required")
	}
	var px hypervisor.ProxmoxClone
	if spec.Proxmox != nil {
		px = *spec.Proxmox
	}
	if spec.Storage != "" {
		px.Storage = spec.Storage // a VMStorage's storage
	}
	if px.Storage != "" && !spec.Full {
		return hypervisor.VMRef{}, "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "a storage can only be chosen for a full clone")
	}
	target := spec.Target
	if target.Node == "" {
		target.Node = spec.Source.Node
	}
	owner := spec.Owner
	owner.Cluster = p.cfg.Cluster
	params := map[string]any{"newid": newID, "description": p.describe(owner, "")}
	if spec.Name != "" {
		params["name"] = spec.Name
	}
	if spec.Target.Node != "" && spec.Target.Node != spec.Source.Node {
		params["target"] = spec.Target.Node
	}
	if spec.Full {
		params["full"] = 1
		if px.Storage != "" {
			params["storage"] = px.Storage
		}
	}
	if px.Pool != "" {
		params["pool"] = px.Pool
	}
	var id string
	p.vmids.taken(newID) // taken from now on, even when the answer is lost
	if err := p.post(ctx, op, vmPath(spec.Source, "/clone"), params, &id); err != nil {
		return hypervisor.VMRef{}, "", err
	}
	return target, hypervisor.TaskID(id), nil
}

// Configure applies spec with as few calls as PVE allows. Extra disks are allocated by the same
// config write (see extraDiskParams). One config read proves the VM is ours
// (tags, or the description block of a fresh clone); a VM still locked by its clone (or anything
// else) gets ErrBusy before anything is uploaded or written, so a caller may configure as soon as
// a clone typically ends instead of reading the clone's task first. The cloud-init ISO, if any, is uploaded
// first and its upload task awaited: a VM must never boot from a half-copied image. Then one
// synchronous config write (PUT) sets hardware, network, tags, description and the ISO's CD-ROM.
// Last, a disk resize is started; PVE 9 resizes in a task, whose UPID is returned so the caller
// waits for it before starting the VM. Without a resize, spec.Start starts the VM and the start's
// UPID is returned; otherwise the TaskID is empty. Tags are replaced by
// the ownership tags plus spec.Tags: tags inherited from the template ("template", ...) would only
// mislead.
//
// net0 gets a MAC derived from the cluster and VMID instead of the one PVE picked at clone time:
// re-applying the same spec is then a no-op for the guest, and the MAC is known before boot.
func (p *Provider) Configure(ctx context.Context, ref hypervisor.VMRef, spec hypervisor.ConfigSpec) (hypervisor.TaskID, error) {
	op := opName("configure", ref)
	if d := spec.Disk; d != nil && (d.Name == "" || d.SizeGiB <= 0) {
		return "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "disk name and a positive size are required")
	}
	// One config read proves ownership (see ownedConfig); its digest makes the write below fail
	// if the VM was replaced while the ISO was uploading.
	vm, cfg, err := p.ownedConfig(ctx, op, ref)
	if err != nil {
		return "", err
	}
	if spec.Proven != nil {
		spec.Proven()
	}
	params := map[string]any{
		"tags":        joinTags(ownershipTags(p.ownerTag, vm.owner), spec.Tags),
		"description": p.describe(vm.owner, spec.Description),
	}
	if d := cfg["digest"]; d != "" {
		params["digest"] = d
	}
	if spec.Cores > 0 {
		params["cores"] = spec.Cores
	}
	if spec.MemoryMiB > 0 {
		params["memory"] = fmt.Sprint(spec.MemoryMiB)
	}
	if len(spec.NICs) > 0 {
		nets, remove, err := nicParams(cfg, spec.NICs)
		if err != nil {
			return "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "%v", err)
		}
		for k, v := range nets {
			params[k] = v
		}
		if len(remove) > 0 {
			params["delete"] = strings.Join(remove, ",")
		}
	} else if spec.Network != nil {
		net, err := p.netDevice(ref, *spec.Network)
		if err != nil {
			return "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "%v", err)
		}
		params["net0"] = net
	}
	if len(spec.ExtraDisks) > 0 {
		disks, err := extraDiskParams(cfg, spec.ExtraDisks)
		if err != nil {
			return "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "%v", err)
		}
		for k, v := range disks {
			params[k] = v
		}
	}
	if len(spec.PCIDevices) > 0 {
		devs, err := pciParams(spec.PCIDevices)
		if err != nil {
			return "", hypervisor.Errorf(hypervisor.ErrInvalid, op, "%v", err)
		}
		for k, v := range devs {
			params[k] = v
		}
	}
	if spec.CloudInit != nil {
		if err := p.putCloudInitISO(ctx, op, ref, *spec.CloudInit); err != nil {
			return "", err
		}
		params[p.cfg.CloudInitDevice] = p.isoVolume(ref) + ",media=cdrom"
	}
	if err := p.put(ctx, op, vmPath(ref, "/config"), params, nil); err != nil {
		return "", err
	}
	// The bindings follow the write that gave the NICs their firewall flag, and precede any
	// start: a VM never runs on its network without its policy.
	if err := p.bindSecurityGroups(ctx, op, ref, spec.NICs); err != nil {
		return "", err
	}
	if spec.Disk != nil {
		return p.resizeDisk(ctx, op, ref, spec.Disk.Name, spec.Disk.SizeGiB)
	}
	if !spec.Start {
		return "", nil
	}
	// The write just made carried the digest of the read that proved the VM ours: PVE took it
	// only for that same VM, so the start acts on that proof, as StopSeen acts on its caller's
	// read, instead of reading the VM once more.
	var id string
	if err := p.post(ctx, op, vmPath(ref, "/status/start"), nil, &id); err != nil {
		return "", err
	}
	return hypervisor.TaskID(id), nil
}

// DefaultBridge is the bridge of a NIC whose NetworkSpec names none.
const DefaultBridge = "vmbr0"

// netDevice renders net0: "virtio=02:..,bridge=vmbr0,tag=42".
func (p *Provider) netDevice(ref hypervisor.VMRef, n hypervisor.NetworkSpec) (string, error) {
	model := n.Model
	if model == "" {
		model = "virtio"
	}
	if n.Name == "" {
		n.Name = DefaultBridge
	}
	if strings.ContainsAny(model+n.Name, ",=; ") {
		return "", fmt.Errorf("network model %q or bridge %q holds a separator", model, n.Name)
	}
	if n.VLAN < 0 || n.VLAN > 4094 {
		return "", fmt.Errorf("VLAN %d is outside 1..4094", n.VLAN)
	}
	s := fmt.Sprintf("%s=%s,bridge=%s", model, p.macFor(ref), n.Name)
	if n.VLAN > 0 {
		s += fmt.Sprintf(",tag=%d", n.VLAN)
	}
	return s, nil
}

// macFor derives a locally administered unicast MAC from the cluster and VMID.
func (p *Provider) macFor(ref hypervisor.VMRef) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s", p.cfg.Cluster, ref.ID))
	return fmt.Sprintf("02:%02X:%02X:%02X:%02X:%02X", sum[0], sum[1], sum[2], sum[3], sum[4])
}

// resizeDisk starts growing disk to sizeGiB and returns the resize task. PVE refuses to shrink; a
// disk already larger than sizeGiB satisfies the request, so that refusal is success, whether it
// comes at once or as the task's exit status (see taskError).
func (p *Provider) resizeDisk(ctx context.Context, op string, ref hypervisor.VMRef, disk string, sizeGiB int) (hypervisor.TaskID, error) {
	var id string
	err := p.put(ctx, op, vmPath(ref, "/resize"), map[string]any{"disk": disk, "size": fmt.Sprintf("%dG", sizeGiB)}, &id)
	if err != nil && isShrinkRefusal(errorText(err)) {
		return "", nil
	}
	return hypervisor.TaskID(id), err
}

func isShrinkRefusal(text string) bool {
	return strings.Contains(text, "shrinking disks is not supported")
}
