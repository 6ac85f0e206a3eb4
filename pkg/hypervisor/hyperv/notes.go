package hyperv

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Hyper-V has no tags: HyperFleet's ownership lives in the VM's Notes, as a fenced block after
// the human-readable text, the same fields Proxmox's description block carries. The module reads
// the same block on the host before any change; both sides take the last block, so text before it
// cannot pass for it. A template is marked by a ```hyperfleet-template block and is never changed.
const (
	ownerBlockStart    = "```hyperfleet"
	templateBlockStart = "```hyperfleet-template"
	blockEnd           = "```"
	ownerTagPrefix     = "hf-o-"
	// maxNotesText bounds the caller's text in the Notes: every byte travels base64-encoded twice
	// on a command line capped at 8191 characters.
	maxNotesText = 512
)

// OwnerTag is the owner mark of the HypervisorCluster cluster ("namespace/name") of the
// installation installationID: "hf-o-" and 16 hex digits of their sha256, the same mark the
// Proxmox provider tags its VMs with.
func OwnerTag(installationID, cluster string) string {
	sum := sha256.Sum256([]byte(installationID + "\x00" + cluster))
	return ownerTagPrefix + hex.EncodeToString(sum[:8])
}

// notes renders a VM's Notes: the caller's text, then the ownership block with the VM's tags
// (Hyper-V has none of its own).
func (p *Provider) notes(o hypervisor.Ownership, text string, tags ...string) string {
	text = strings.TrimSpace(strings.ReplaceAll(text, blockEnd, "'''"))
	if text == "" {
		text = "HyperFleet runner VM. HyperFleet deletes it when its MachineClaim goes away."
	}
	if len(text) > maxNotesText {
		text = text[:maxNotesText]
	}
	tagLine := ""
	if t := cleanTags(tags); len(t) > 0 {
		tagLine = "tags: " + strings.Join(t, ",") + "\n"
	}
	return fmt.Sprintf("%s\n\n%s\nmanaged-by: hyperfleet\ninstallation: %s\ncluster: %s\nowner-tag: %s\nclaim: %s\nclaim-id: %s\n%s%s",
		text, ownerBlockStart, p.cfg.InstallationID, p.cfg.Cluster, p.ownerTag, o.Claim(), o.ClaimID, tagLine, blockEnd)
}

// cleanTags keeps tags that fit on one line of the block, without duplicates, in order.
func cleanTags(tags []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range tags {
		t = strings.TrimSpace(t)
		if t == "" || seen[t] || strings.ContainsAny(t, ",\n\r`") {
			continue
		}
		seen[t] = true
		out = append(out, t)
	}
	return out
}

// notesTags reads the tags of a VM's ownership block or a template's block.
func notesTags(notes string) []string {
	kv := notesBlock(notes, templateBlockStart)
	if kv == nil {
		kv = notesBlock(notes, ownerBlockStart)
	}
	var out []string
	for _, t := range strings.Split(kv["tags"], ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// notesBlock parses the last fenced block opened by start into its keys; nil when absent.
func notesBlock(notes, start string) map[string]string {
	notes = strings.ReplaceAll(notes, "\r\n", "\n")
	open := start + "\n"
	i := strings.LastIndex(notes, open)
	if i < 0 {
		return nil
	}
	body := notes[i+len(open):]
	if end := strings.Index(body, blockEnd); end >= 0 {
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

func isTemplateNotes(notes string) bool {
	return notesBlock(notes, templateBlockStart) != nil
}

// ownerFromNotes reads the ownership of a VM; nil for a foreign VM, another installation's or
// another HypervisorCluster's, and for a template.
func (p *Provider) ownerFromNotes(notes string) *hypervisor.Ownership {
	if isTemplateNotes(notes) {
		return nil
	}
	kv := notesBlock(notes, ownerBlockStart)
	if kv["managed-by"] != "hyperfleet" || kv["installation"] != p.cfg.InstallationID || kv["owner-tag"] != p.ownerTag {
		return nil
	}
	o := hypervisor.Ownership{Cluster: p.cfg.Cluster, ClaimID: kv["claim-id"]}
	o.ClaimNamespace, o.ClaimName, _ = strings.Cut(kv["claim"], "/")
	return &o
}

// expectation is what the module checks in a VM's Notes before changing it.
type expectation struct {
	Installation string
	OwnerTag     string
	ClaimID      string
}

func (p *Provider) expect(claimID string) expectation {
	return expectation{Installation: p.cfg.InstallationID, OwnerTag: p.ownerTag, ClaimID: claimID}
}
