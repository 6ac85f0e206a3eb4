package proxmox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Ownership tags. Tags are what /cluster/resources returns for every VM in one call, so they carry
// the whole claim identity: OwnedVMs never needs a per-VM config read. Kubernetes namespaces and
// names are already valid PVE tag characters, and a namespace has no dot, so "<ns>.<name>" splits
// unambiguously.
//
// The owner tag hashes the installation ID (random, kept in the HypervisorCluster's spec) with the
// HypervisorCluster's namespace/name: two installations never share it, even with identically
// named objects, and a HypervisorCluster of another namespace cannot claim it by copying the ID.
// Releases before installation identities tagged VMs with a hash of namespace/name alone
// ("hf-c-"); such VMs are read as Legacy and only ever adopted by the claim that tracks them.
const (
	// TagManaged marks every VM HyperFleet created, whichever HypervisorCluster owns it.
	TagManaged       = "hyperfleet"
	ownerTagPrefix   = "hf-o-"
	claimTagPrefix   = "hf-claim-"
	claimIDTagPrefix = "hf-id-"
	// Marks of releases before installation identities.
	clusterTagPrefix = "hf-c-"
	uidTagPrefix     = "hf-uid-"

	// The description block is the human-readable copy of the ownership, shown in the Proxmox UI
	// as a code block. It is also present from the moment the clone finishes, before any tag write.
	descBlockStart = "```hyperfleet"
	descBlockEnd   = "```"
	maxDescription = 8192
)

// OwnerTag is the ownership tag of the HypervisorCluster cluster ("namespace/name") of the
// installation installationID: "hf-o-" and 16 hex digits of their sha256.
func OwnerTag(installationID, cluster string) string {
	sum := sha256.Sum256([]byte(installationID + "\x00" + cluster))
	return ownerTagPrefix + hex.EncodeToString(sum[:8])
}

// ClusterTag is the ownership tag releases before installation identities used: "hf-c-" and the
// first 8 hex digits of sha256(cluster). Two installations with the same namespace/name share it,
// so it only ever proves that a VM may be a claim's to adopt.
func ClusterTag(cluster string) string {
	sum := sha256.Sum256([]byte(cluster))
	return clusterTagPrefix + hex.EncodeToString(sum[:4])
}

// ownershipTags are the tags stamped on a VM owned by ownerTag for o's claim.
func ownershipTags(ownerTag string, o hypervisor.Ownership) []string {
	tags := []string{TagManaged, ownerTag}
	if o.ClaimNamespace != "" || o.ClaimName != "" {
		tags = append(tags, claimTagPrefix+sanitizeTag(o.ClaimNamespace)+"."+sanitizeTag(o.ClaimName))
	}
	if o.ClaimID != "" {
		tags = append(tags, claimIDTagPrefix+sanitizeTag(o.ClaimID))
	}
	return tags
}

// isOwnershipTag reports whether t is one of HyperFleet's ownership tags (of any owner or release).
func isOwnershipTag(t string) bool {
	if t == TagManaged {
		return true
	}
	for _, p := range []string{ownerTagPrefix, claimTagPrefix, claimIDTagPrefix, clusterTagPrefix, uidTagPrefix} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// sanitizeTag lower-cases s and replaces what PVE's tag pattern [a-z0-9_][a-z0-9_\-+.]* forbids.
func sanitizeTag(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
		if i > 0 {
			ok = ok || c == '-' || c == '+' || c == '.'
		}
		if !ok {
			b[i] = '_'
		}
	}
	return string(b)
}

// joinTags renders tags the way PVE stores them: sanitized, de-duplicated, sorted, ';'-joined.
func joinTags(tags ...[]string) string {
	set := map[string]bool{}
	for _, list := range tags {
		for _, t := range list {
			if t = sanitizeTag(strings.TrimSpace(t)); t != "" {
				set[t] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	sort.Strings(out)
	return strings.Join(out, ";")
}

// splitTags parses PVE's tag list; PVE accepts ';', ',' and spaces as separators.
func splitTags(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ';' || r == ',' || r == ' ' })
}

// tagVerdict is what a VM's tags say about its owner.
type tagVerdict int

const (
	// untagged: no HyperFleet tag at all, a foreign VM or a fresh clone not yet tagged.
	untagged tagVerdict = iota
	// ours: this installation's HypervisorCluster's tags.
	ours
	// legacy: an older release's tags for a HypervisorCluster of our namespace/name, which may be
	// ours or another installation's.
	legacy
	// otherCluster: HyperFleet tags of another HypervisorCluster or installation.
	otherCluster
)

// ownerFromTags reads the ownership of a VM from its tags.
func (p *Provider) ownerFromTags(tags []string) (*hypervisor.Ownership, tagVerdict) {
	var managed, mine, otherOwner, old bool
	o := hypervisor.Ownership{Cluster: p.cfg.Cluster}
	for _, t := range tags {
		switch {
		case t == TagManaged:
			managed = true
		case t == p.ownerTag:
			mine = true
		case strings.HasPrefix(t, ownerTagPrefix):
			otherOwner = true
		case t == p.legacyTag:
			old = true
		case strings.HasPrefix(t, claimTagPrefix):
			ns, name, _ := strings.Cut(strings.TrimPrefix(t, claimTagPrefix), ".")
			o.ClaimNamespace, o.ClaimName = ns, name
		case strings.HasPrefix(t, claimIDTagPrefix):
			o.ClaimID = strings.TrimPrefix(t, claimIDTagPrefix)
		case strings.HasPrefix(t, uidTagPrefix):
			o.LegacyClaimUID = strings.TrimPrefix(t, uidTagPrefix)
		}
	}
	switch {
	case managed && mine && !otherOwner:
		o.LegacyClaimUID = ""
		return &o, ours
	case managed && old && !mine && !otherOwner && o.LegacyClaimUID != "":
		o.Legacy, o.ClaimID = true, ""
		return &o, legacy
	case managed:
		return nil, otherCluster
	default:
		for _, t := range tags {
			if isOwnershipTag(t) {
				return nil, otherCluster
			}
		}
		return nil, untagged
	}
}

// describe renders the VM description: the caller's text, then the ownership block.
func (p *Provider) describe(o hypervisor.Ownership, text string) string {
	block := fmt.Sprintf("%s\nmanaged-by: hyperfleet\ninstallation: %s\ncluster: %s\nowner-tag: %s\nclaim: %s\nclaim-id: %s\n%s",
		descBlockStart, p.cfg.InstallationID, p.cfg.Cluster, p.ownerTag, o.Claim(), o.ClaimID, descBlockEnd)
	text = strings.TrimSpace(text)
	if text == "" {
		text = "HyperFleet runner VM. HyperFleet deletes it when its MachineClaim goes away."
	}
	if room := maxDescription - len(block) - 2; len(text) > room {
		text = text[:max(room, 0)]
	}
	return text + "\n\n" + block
}

// descriptionBlock parses the ownership block of a VM description into its keys; nil when absent.
// The block is the last one: describe appends it after the caller's text, which must not be able
// to pass for it.
func descriptionBlock(desc string) map[string]string {
	start := strings.LastIndex(desc, descBlockStart+"\n")
	if start < 0 {
		return nil
	}
	body := desc[start+len(descBlockStart)+1:]
	if end := strings.Index(body, descBlockEnd); end >= 0 {
		body = body[:end]
	}
	kv := map[string]string{}
	for _, line := range strings.Split(body, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return kv
}

// ownerFromDescription reads the ownership block; nil when absent or naming another owner. A block
// written by an older release for our namespace/name gives a Legacy owner.
func (p *Provider) ownerFromDescription(desc string) *hypervisor.Ownership {
	kv := descriptionBlock(desc)
	if kv["managed-by"] != "hyperfleet" {
		return nil
	}
	o := hypervisor.Ownership{Cluster: p.cfg.Cluster}
	o.ClaimNamespace, o.ClaimName, _ = strings.Cut(kv["claim"], "/")
	switch {
	case kv["owner-tag"] == p.ownerTag:
		o.ClaimID = kv["claim-id"]
	case kv["owner-tag"] == "" && kv["cluster-tag"] == p.legacyTag && kv["claim-uid"] != "":
		o.Legacy, o.LegacyClaimUID = true, kv["claim-uid"]
	default:
		return nil
	}
	return &o
}

// ownedVM is a VM this provider may change, as one read just proved.
type ownedVM struct {
	owner hypervisor.Ownership
	// tagged is false for a fresh clone recognised by its description only; the next write tags it.
	tagged bool
	// facts is the read that proved ownership.
	facts *vmFacts
}

// ensureOwned proves that ref belongs to this installation before a mutating call, by reading the
// VM every time. Ownership is never remembered: a VM deleted behind our back (in the PVE UI, by
// another tool) frees its VMID at once, and the next VM with that VMID may be anyone's. Foreign
// and legacy VMs get ErrNotOwned.
func (p *Provider) ensureOwned(ctx context.Context, op string, ref hypervisor.VMRef) (ownedVM, error) {
	f, err := p.inspect(ctx, op, ref)
	if err != nil {
		return ownedVM{}, err
	}
	if f.owner == nil || f.owner.Legacy {
		return ownedVM{}, hypervisor.Errorf(hypervisor.ErrNotOwned, op,
			"VM %s (%q, tags %q) lacks the ownership tags %s;%s", ref, f.name, strings.Join(f.tags, ";"), TagManaged, p.ownerTag)
	}
	return ownedVM{owner: *f.owner, tagged: f.tagged, facts: f}, nil
}

// seenOwned takes the proof of a VM read the caller made in the same operation (see
// hypervisor.Provider.StopSeen): the read's owner, tags and power state, checked again here so a
// VM that is not ours, a legacy VM or a template is refused as ensureOwned would refuse it.
func (p *Provider) seenOwned(op string, vm hypervisor.VM) (ownedVM, error) {
	ref := vm.Ref
	if ref.IsZero() || ref.Node == "" {
		return ownedVM{}, hypervisor.Errorf(hypervisor.ErrInvalid, op, "VM reference %q needs a node and a VMID", ref)
	}
	_, verdict := p.ownerFromTags(vm.Tags)
	if vm.Owner == nil || vm.Owner.Legacy || vm.Template || vm.Owner.Cluster != p.cfg.Cluster ||
		(verdict != ours && verdict != untagged) {
		return ownedVM{}, hypervisor.Errorf(hypervisor.ErrNotOwned, op,
			"VM %s (%q, tags %q) lacks the ownership tags %s;%s", ref, vm.Name, strings.Join(vm.Tags, ";"), TagManaged, p.ownerTag)
	}
	return ownedVM{owner: *vm.Owner, tagged: verdict == ours,
		facts: &vmFacts{ref: ref, name: vm.Name, state: vm.State, lock: vm.Lock, tags: vm.Tags, owner: vm.Owner}}, nil
}

// ownedConfig proves that ref belongs to this installation with one read of its config, for the
// calls that change the config. The config carries everything the proof needs: the tags, the
// description block (all a fresh clone has before its first write), the template flag and the
// lock. It also carries PVE's digest of the config file: a config write that sends that digest
// back is refused if the VM changed in between, so the read and the write act on the same VM even
// when it is deleted and its VMID reused while the caller uploads a cloud-init ISO. Ownership is
// not remembered across calls.
func (p *Provider) ownedConfig(ctx context.Context, op string, ref hypervisor.VMRef) (ownedVM, map[string]string, error) {
	if ref.IsZero() || ref.Node == "" {
		return ownedVM{}, nil, hypervisor.Errorf(hypervisor.ErrInvalid, op, "VM reference %q needs a node and a VMID", ref)
	}
	cfg, err := p.config(ctx, op, ref)
	if err != nil {
		return ownedVM{}, nil, err
	}
	if lock := cfg["lock"]; lock != "" {
		// A clone still running holds "lock: clone" and has no tags or description yet: it is
		// busy, not foreign. Nothing is written to a locked VM either way.
		return ownedVM{}, nil, hypervisor.Errorf(hypervisor.ErrBusy, op, "VM %s is locked (%s)", ref, lock)
	}
	tags := splitTags(cfg["tags"])
	owner, verdict := p.ownerFromTags(tags)
	tagged := verdict == ours || verdict == legacy
	if verdict == untagged {
		owner = p.ownerFromDescription(cfg["description"])
	}
	if cfg["template"] != "" && cfg["template"] != "0" {
		owner = nil // a template is never ours to change, whatever it carries
	}
	if owner == nil || owner.Legacy {
		return ownedVM{}, nil, hypervisor.Errorf(hypervisor.ErrNotOwned, op,
			"VM %s (%q, tags %q) lacks the ownership tags %s;%s", ref, cfg["name"], strings.Join(tags, ";"), TagManaged, p.ownerTag)
	}
	return ownedVM{owner: *owner, tagged: tagged}, cfg, nil
}

// ensureTagged writes the ownership tags on a VM recognised by its description only.
func (p *Provider) ensureTagged(ctx context.Context, op string, ref hypervisor.VMRef, vm ownedVM) error {
	if vm.tagged {
		return nil
	}
	tags := joinTags(ownershipTags(p.ownerTag, vm.owner))
	return p.put(ctx, op, vmPath(ref, "/config"), map[string]any{"tags": tags}, nil)
}
