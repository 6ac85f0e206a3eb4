package proxmox

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// number decodes the numbers PVE sends as JSON numbers, numeric strings, booleans or null.
type number float64

func (n *number) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	switch s {
	case "", "null", "false":
		*n = 0
		return nil
	case "true":
		*n = 1
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("not a number: %s", b)
	}
	*n = number(f)
	return nil
}

// vmStatus is GET /nodes/{node}/qemu/{vmid}/status/current; it carries the tags, so one call both
// proves ownership and gives the power state.
type vmStatus struct {
	Name      string `json:"name"`
	Status    string `json:"status"`
	QMPStatus string `json:"qmpstatus"`
	Lock      string `json:"lock"`
	Tags      string `json:"tags"`
	Template  number `json:"template"`
	CPUs      number `json:"cpus"`
	MaxMem    number `json:"maxmem"`
	Uptime    number `json:"uptime"`
}

// vmResource is one "vm" row of GET /cluster/resources.
type vmResource struct {
	Type     string `json:"type"`
	VMID     number `json:"vmid"`
	Node     string `json:"node"`
	Name     string `json:"name"`
	Status   string `json:"status"`
	Lock     string `json:"lock"`
	Tags     string `json:"tags"`
	Template number `json:"template"`
	MaxCPU   number `json:"maxcpu"`
	MaxMem   number `json:"maxmem"`
	MaxDisk  number `json:"maxdisk"`
	Uptime   number `json:"uptime"`
	CPU      number `json:"cpu"`
	Mem      number `json:"mem"`
	Disk     number `json:"disk"`
}

// usage is the row's resource usage.
func (r vmResource) usage() hypervisor.Usage {
	return hypervisor.Usage{CPUs: int(r.MaxCPU), CPULoad: float64(r.CPU),
		MemoryBytes: uint64(r.MaxMem), MemoryUsedBytes: uint64(r.Mem),
		DiskBytes: uint64(r.MaxDisk), DiskUsedBytes: uint64(r.Disk)}
}

// vmFacts is what one inspection of a VM found.
type vmFacts struct {
	ref    hypervisor.VMRef
	name   string
	state  hypervisor.PowerState
	lock   string
	tags   []string
	tmpl   bool
	cores  int
	memMiB int
	uptime time.Duration
	owner  *hypervisor.Ownership
	tagged bool
}

func (f *vmFacts) vm() hypervisor.VM {
	return hypervisor.VM{Ref: f.ref, Name: f.name, State: f.state, Template: f.tmpl, Tags: f.tags, Lock: f.lock,
		Cores: f.cores, MemoryMiB: f.memMiB, Owner: f.owner, Uptime: f.uptime}
}

func powerState(status, qmpStatus string) hypervisor.PowerState {
	switch {
	case status == "running" && (qmpStatus == "" || qmpStatus == "running"):
		return hypervisor.PowerStateRunning
	case status == "running" && (qmpStatus == "paused" || qmpStatus == "suspended" || qmpStatus == "prelaunch"):
		return hypervisor.PowerStatePaused
	case status == "running":
		return hypervisor.PowerStateRunning
	case status == "stopped":
		return hypervisor.PowerStateStopped
	default:
		return hypervisor.PowerStateUnknown
	}
}

// inspect reads a VM: its status (with tags) and, only for a VM without HyperFleet tags, its config
// to look for the description block a fresh clone carries before it is tagged.
func (p *Provider) inspect(ctx context.Context, op string, ref hypervisor.VMRef) (*vmFacts, error) {
	if ref.IsZero() || ref.Node == "" {
		return nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "VM reference %q needs a node and a VMID", ref)
	}
	var st vmStatus
	if err := p.get(ctx, op, vmPath(ref, "/status/current"), &st); err != nil {
		return nil, err
	}
	f := &vmFacts{ref: ref, name: st.Name, state: powerState(st.Status, st.QMPStatus), lock: st.Lock,
		tags: splitTags(st.Tags), tmpl: st.Template != 0, cores: int(st.CPUs), memMiB: int(st.MaxMem / (1 << 20)),
		uptime: time.Duration(st.Uptime) * time.Second}
	owner, verdict := p.ownerFromTags(f.tags)
	switch verdict {
	case ours, legacy:
		f.owner, f.tagged = owner, true
	case untagged:
		var cfg struct {
			Description string `json:"description"`
		}
		if err := p.get(ctx, op, vmPath(ref, "/config"), &cfg); err != nil {
			return nil, err
		}
		f.owner = p.ownerFromDescription(cfg.Description)
	}
	if f.tmpl {
		// A template is never ours to change, whatever it carries.
		f.owner = nil
	}
	return f, nil
}

// VM returns the VM's state and owner; ErrNotFound when it does not exist. Owner comes from the
// tags, or from the description block for a fresh clone that is not tagged yet.
func (p *Provider) VM(ctx context.Context, ref hypervisor.VMRef) (hypervisor.VM, error) {
	f, err := p.inspect(ctx, opName("get VM", ref), ref)
	if err != nil {
		return hypervisor.VM{}, err
	}
	return f.vm(), nil
}

// Adopt re-marks a VM that an older release marked for our namespace/name, once its legacy claim
// UID proves it is the VM of the claim now identified by owner. Tags other than HyperFleet's
// ownership tags (the claim's own) are kept.
func (p *Provider) Adopt(ctx context.Context, ref hypervisor.VMRef, owner hypervisor.Ownership, legacyClaimUID string) error {
	op := opName("adopt", ref)
	if owner.ClaimID == "" || legacyClaimUID == "" {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "a claim ID and the legacy claim UID are required")
	}
	f, err := p.inspect(ctx, op, ref)
	if err != nil {
		return err
	}
	switch {
	case f.owner != nil && !f.owner.Legacy && f.owner.ClaimID == owner.ClaimID &&
		f.owner.ClaimNamespace == owner.ClaimNamespace && f.owner.ClaimName == owner.ClaimName:
		return nil // adopted before
	case f.owner == nil || !f.owner.Legacy || f.owner.LegacyClaimUID != sanitizeTag(legacyClaimUID) ||
		f.owner.ClaimNamespace != owner.ClaimNamespace || f.owner.ClaimName != owner.ClaimName:
		return hypervisor.Errorf(hypervisor.ErrNotOwned, op, "VM %s (%q, tags %q) is not the legacy VM of claim %s (uid %s)",
			ref, f.name, strings.Join(f.tags, ";"), owner.Claim(), legacyClaimUID)
	}
	var keep []string
	for _, t := range f.tags {
		if !isOwnershipTag(t) {
			keep = append(keep, t)
		}
	}
	owner.Cluster, owner.Legacy, owner.LegacyClaimUID = p.cfg.Cluster, false, ""
	params := map[string]any{
		"tags":        joinTags(ownershipTags(p.ownerTag, owner), keep),
		"description": p.describe(owner, fmt.Sprintf("HyperFleet MachineClaim %s", owner.Claim())),
	}
	return p.put(ctx, op, vmPath(ref, "/config"), params, nil)
}

// OwnedVMs lists this cluster's VMs with one GET /cluster/resources?type=vm, and the Legacy VMs an
// older release marked for our namespace/name. Owners come from the tags alone; a fresh clone
// whose tags are not written yet is not listed (VM finds it by VMID).
func (p *Provider) OwnedVMs(ctx context.Context) ([]hypervisor.VM, error) {
	rows, err := p.listVMs(ctx, "list owned VMs")
	if err != nil {
		return nil, err
	}
	var vms []hypervisor.VM
	for _, r := range rows {
		if r.Type != "" && r.Type != "qemu" {
			continue
		}
		owner, verdict := p.ownerFromTags(splitTags(r.Tags))
		if (verdict != ours && verdict != legacy) || r.Template != 0 {
			continue
		}
		ref := vmRef(r.Node, int(r.VMID))
		vms = append(vms, hypervisor.VM{Ref: ref, Name: r.Name, State: powerState(r.Status, ""),
			Tags: splitTags(r.Tags), Lock: r.Lock, Cores: int(r.MaxCPU), MemoryMiB: int(r.MaxMem / (1 << 20)),
			Owner: owner, Uptime: time.Duration(r.Uptime) * time.Second, Usage: r.usage()})
	}
	return vms, nil
}

// Addresses returns the guest's addresses from the QEMU guest agent, skipping loopback and
// link-local ones. It returns none, without error, while the VM or its agent is not running.
func (p *Provider) Addresses(ctx context.Context, ref hypervisor.VMRef) ([]hypervisor.Address, error) {
	var res struct {
		Result []struct {
			Name        string `json:"name"`
			IPAddresses []struct {
				IPAddress string `json:"ip-address"`
			} `json:"ip-addresses"`
		} `json:"result"`
	}
	err := p.get(ctx, opName("get addresses of", ref), vmPath(ref, "/agent/network-get-interfaces"), &res)
	if err != nil {
		t := errorText(err)
		if strings.Contains(t, "guest agent is not running") || strings.Contains(t, "not running") ||
			strings.Contains(t, "no qemu guest agent configured") {
			return nil, nil
		}
		return nil, err
	}
	var out []hypervisor.Address
	for _, iface := range res.Result {
		if iface.Name == "lo" {
			continue
		}
		for _, a := range iface.IPAddresses {
			ip, err := netip.ParseAddr(a.IPAddress)
			if err != nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
				continue
			}
			out = append(out, hypervisor.Address{Type: hypervisor.AddressInternalIP, Address: ip.String()})
		}
	}
	return out, nil
}
