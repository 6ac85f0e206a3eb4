package proxmox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Ownership tags. Tags are what /cluster/resources returns for every VM in one call, so they carry
// the whole claim identity: OwnedVMs never needs a per-VM config read. Kubernetes namespaces and
// names are already valid PVE tag characters, and a namespace has no dot, so "<ns>.<name>" splits
// unambiguously.
const (
	// TagManaged marks every VM HyperFleet created, whichever HypervisorCluster owns it.
	TagManaged       = "hyperfleet"
	clusterTagPrefix = "hf-c-"
	claimTagPrefix   = "hf-claim-"
	uidTagPrefix     = "hf-uid-"

	// The description block is the human-readable copy of the ownership, shown in the Proxmox UI
	// as a code block. It is also present from the moment the clone finishes, before any tag write.
	descBlockStart = "```hyperfleet"
	descBlockEnd   = "```"
	maxDescription = 8192
)

// ClusterTag is the per-cluster ownership tag: "hf-c-" and the first 8 hex digits of
// sha256(cluster). It is stable, lower-case and valid as a PVE tag whatever the cluster's name.
func ClusterTag(cluster string) string {
	sum := sha256.Sum256([]byte(cluster))
	return clusterTagPrefix + hex.EncodeToString(sum[:4])
}

// ownershipTags are the tags stamped on a VM owned by clusterTag for o's claim.
func ownershipTags(clusterTag string, o hypervisor.Ownership) []string {
	tags := []string{TagManaged, clusterTag}
	if o.ClaimNamespace != "" || o.ClaimName != "" {
		tags = append(tags, claimTagPrefix+sanitizeTag(o.ClaimNamespace)+"."+sanitizeTag(o.ClaimName))
	}
	if o.ClaimUID != "" {
		tags = append(tags, uidTagPrefix+sanitizeTag(o.ClaimUID))
	}
	return tags
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
	// ours: this cluster's tags.
	ours
	// otherCluster: HyperFleet tags of another HypervisorCluster.
	otherCluster
)

// ownerFromTags reads the ownership of a VM from its tags.
func (p *Provider) ownerFromTags(tags []string) (*hypervisor.Ownership, tagVerdict) {
	var managed, mine, other bool
	o := hypervisor.Ownership{Cluster: p.cfg.Cluster}
	for _, t := range tags {
		switch {
		case t == TagManaged:
			managed = true
		case t == p.clusterTag:
			mine = true
		case strings.HasPrefix(t, clusterTagPrefix):
			other = true
		case strings.HasPrefix(t, claimTagPrefix):
			ns, name, _ := strings.Cut(strings.TrimPrefix(t, claimTagPrefix), ".")
			o.ClaimNamespace, o.ClaimName = ns, name
		case strings.HasPrefix(t, uidTagPrefix):
			o.ClaimUID = strings.TrimPrefix(t, uidTagPrefix)
		}
	}
	switch {
	case managed && mine:
		return &o, ours
	case managed || other:
		return nil, otherCluster
	default:
		return nil, untagged
	}
}

// describe renders the VM description: the caller's text, then the ownership block.
func (p *Provider) describe(o hypervisor.Ownership, text string) string {
	block := fmt.Sprintf("%s\nmanaged-by: hyperfleet\ncluster: %s\ncluster-tag: %s\nclaim: %s\nclaim-uid: %s\n%s",
		descBlockStart, o.Cluster, p.clusterTag, o.Claim(), o.ClaimUID, descBlockEnd)
	text = strings.TrimSpace(text)
	if text == "" {
		text = "HyperFleet runner VM. HyperFleet deletes it when its MachineClaim goes away."
	}
	if room := maxDescription - len(block) - 2; len(text) > room {
		text = text[:max(room, 0)]
	}
	return text + "\n\n" + block
}

// ownerFromDescription reads the ownership block; nil when absent or naming another cluster.
func (p *Provider) ownerFromDescription(desc string) *hypervisor.Ownership {
	start := strings.Index(desc, descBlockStart+"\n")
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
	if kv["managed-by"] != "hyperfleet" || kv["cluster-tag"] != p.clusterTag {
		return nil
	}
	o := hypervisor.Ownership{Cluster: kv["cluster"], ClaimUID: kv["claim-uid"]}
	o.ClaimNamespace, o.ClaimName, _ = strings.Cut(kv["claim"], "/")
	return &o
}

// ownedVM is a VM this provider may change.
type ownedVM struct {
	owner hypervisor.Ownership
	// tagged is false for a fresh clone recognised by its description only; the next write tags it.
	tagged bool
	// facts is the read that proved ownership; nil when the ownership cache answered.
	facts *vmFacts
}

// ensureOwned proves that ref belongs to this cluster before a mutating call: from the ownership
// cache when fresh, otherwise by reading the VM. Foreign VMs get ErrNotOwned.
func (p *Provider) ensureOwned(ctx context.Context, op string, ref hypervisor.VMRef) (ownedVM, error) {
	if e, ok := p.owned.get(ref); ok {
		return ownedVM{owner: e.owner, tagged: e.tagged}, nil
	}
	f, err := p.inspect(ctx, op, ref)
	if err != nil {
		return ownedVM{}, err
	}
	if f.owner == nil {
		return ownedVM{}, hypervisor.Errorf(hypervisor.ErrNotOwned, op,
			"VM %s (%q, tags %q) lacks the ownership tags %s;%s", ref, f.name, strings.Join(f.tags, ";"), TagManaged, p.clusterTag)
	}
	p.owned.put(ref, *f.owner, f.tagged)
	return ownedVM{owner: *f.owner, tagged: f.tagged, facts: f}, nil
}

// ensureTagged writes the ownership tags on a VM recognised by its description only.
func (p *Provider) ensureTagged(ctx context.Context, op string, ref hypervisor.VMRef, vm ownedVM) error {
	if vm.tagged {
		return nil
	}
	tags := joinTags(ownershipTags(p.clusterTag, vm.owner))
	if err := p.put(ctx, op, vmPath(ref, "/config"), map[string]any{"tags": tags}, nil); err != nil {
		return err
	}
	p.owned.markTagged(ref)
	return nil
}

// ownershipCache remembers VMs proven ours (by a read, or by our own clone) for a short time, so a
// burst of calls on one VM costs one read instead of one per call. The TTL bounds the window in
// which a VMID deleted and reused by someone else could be mistaken for ours.
type ownershipCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[hypervisor.VMRef]ownershipEntry
}

type ownershipEntry struct {
	owner  hypervisor.Ownership
	tagged bool
	at     time.Time
}

func newOwnershipCache(ttl time.Duration) *ownershipCache {
	return &ownershipCache{ttl: ttl, m: map[hypervisor.VMRef]ownershipEntry{}}
}

func (c *ownershipCache) get(ref hypervisor.VMRef) (ownershipEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[ref]
	if !ok || time.Since(e.at) > c.ttl {
		delete(c.m, ref)
		return ownershipEntry{}, false
	}
	return e, true
}

func (c *ownershipCache) put(ref hypervisor.VMRef, owner hypervisor.Ownership, tagged bool) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[ref] = ownershipEntry{owner: owner, tagged: tagged, at: time.Now()}
}

func (c *ownershipCache) markTagged(ref hypervisor.VMRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[ref]; ok {
		e.tagged = true
		c.m[ref] = e
	}
}

func (c *ownershipCache) forget(ref hypervisor.VMRef) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, ref)
}

// retain drops tagged entries whose VM is no longer listed as ours; untagged fresh clones never
// appear in a tag-based listing and are kept.
func (c *ownershipCache) retain(listed map[hypervisor.VMRef]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for ref, e := range c.m {
		if e.tagged && !listed[ref] {
			delete(c.m, ref)
		}
	}
}
