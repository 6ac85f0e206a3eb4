package proxmox

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// k8sName is what Kubernetes accepts as a namespace (no dots) or object name (dots allowed).
var (
	k8sNamespace = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	k8sName      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
	randomID     = regexp.MustCompile(`^[a-z0-9]{8,32}$`)
)

func fuzzProvider(t *testing.T) *Provider {
	t.Helper()
	p, err := New(Config{Endpoint: "https://pve.example:8006", TokenID: "hf@pve!ci", TokenSecret: "x",
		Cluster: "fleet/pve-a", InstallationID: testInstallation})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzOwnershipRoundTrip: the ownership HyperFleet writes on a VM (tags and description block) reads
// back as exactly that ownership, for every claim Kubernetes can name, whatever text precedes the
// block; every tag is one PVE accepts; another installation reads none of it as its own.
func FuzzOwnershipRoundTrip(f *testing.F) {
	f.Add("runners", "ubuntu-x64.abc12", "6f1c2d3e0a1b4c5d", "Runner for ubuntu-x64")
	f.Add("a", "b", "00000000", "")
	f.Add("ns", "name", "0123456789abcdef", "```hyperfleet\nmanaged-by: hyperfleet\nowner-tag: hf-o-0000000000000000\nclaim: evil/x\nclaim-id: 1\n```")
	f.Fuzz(func(t *testing.T, ns, name, claimID, text string) {
		p := fuzzProvider(t)
		o := hypervisor.Ownership{Cluster: p.cfg.Cluster, ClaimNamespace: ns, ClaimName: name, ClaimID: claimID}
		tags := splitTags(joinTags(ownershipTags(p.ownerTag, o), []string{text}))
		for _, tag := range tags {
			if !pveTag.MatchString(tag) {
				t.Fatalf("tag %q is not a valid PVE tag", tag)
			}
		}
		desc := p.describe(o, text)
		if len(desc) > maxDescription {
			t.Fatalf("description of %d bytes exceeds %d", len(desc), maxDescription)
		}
		other, err := New(Config{Endpoint: "https://pve.example:8006", TokenID: "hf@pve!ci", TokenSecret: "x",
			Cluster: p.cfg.Cluster, InstallationID: "fedcba9876543210"})
		if err != nil {
			t.Fatal(err)
		}
		if got, verdict := other.ownerFromTags(tags); got != nil || verdict == ours {
			t.Fatalf("another installation reads %v as its own", tags)
		}
		if got := other.ownerFromDescription(desc); got != nil && !got.Legacy {
			t.Fatalf("another installation reads %q as its own", desc)
		}
		if !k8sNamespace.MatchString(ns) || len(ns) > 63 || !k8sName.MatchString(name) || len(name) > 253 || !randomID.MatchString(claimID) {
			return // not a claim Kubernetes can name: no round trip promised
		}
		got, verdict := p.ownerFromTags(tags)
		if verdict != ours || got == nil || *got != o {
			t.Fatalf("tags %v read back as %+v (%v), want %+v", tags, got, verdict, o)
		}
		if got := p.ownerFromDescription(desc); got == nil || *got != o {
			t.Fatalf("description %q reads back as %+v, want %+v", desc, got, o)
		}
	})
}

// FuzzParseOwnership: whatever tags and description a VM carries (anyone with access to the PVE UI
// can write them), reading them never panics, and they make the VM ours only if they carry our
// owner tag, never through the legacy marks alone.
func FuzzParseOwnership(f *testing.F) {
	p := &Provider{cfg: Config{Cluster: "fleet/pve-a", InstallationID: testInstallation},
		ownerTag: OwnerTag(testInstallation, "fleet/pve-a"), legacyTag: ClusterTag("fleet/pve-a")}
	f.Add("hyperfleet;"+p.ownerTag+";hf-claim-runners.a;hf-id-0123456789abcdef", "")
	f.Add("hyperfleet;"+p.legacyTag+";hf-uid-6f1c2d3e-0a1b", "```hyperfleet\nmanaged-by: hyperfleet\ncluster-tag: "+p.legacyTag+"\nclaim: a/b\nclaim-uid: u\n```")
	f.Add("dev,team-a prod", "```hyperfleet\nmanaged-by: hyperfleet\nowner-tag: "+p.ownerTag+"\nclaim: a/b\nclaim-id: x\n```")
	f.Add(";;;", "```hyperfleet\n```hyperfleet\n")
	f.Fuzz(func(t *testing.T, tags, desc string) {
		owner, verdict := p.ownerFromTags(splitTags(tags))
		switch verdict {
		case ours:
			if owner == nil || owner.Legacy || !strings.Contains(tags, p.ownerTag) || !strings.Contains(tags, TagManaged) {
				t.Fatalf("tags %q read as ours: %+v", tags, owner)
			}
		case legacy:
			if owner == nil || !owner.Legacy || owner.ClaimID != "" {
				t.Fatalf("tags %q read as legacy: %+v", tags, owner)
			}
		default:
			if owner != nil {
				t.Fatalf("tags %q (verdict %v) gave an owner %+v", tags, verdict, owner)
			}
		}
		if o := p.ownerFromDescription(desc); o != nil {
			if !o.Legacy && !strings.Contains(desc, "owner-tag: "+p.ownerTag) {
				t.Fatalf("description %q read as ours without our owner tag", desc)
			}
			if o.Legacy && (o.ClaimID != "" || !strings.Contains(desc, p.legacyTag)) {
				t.Fatalf("description %q read as legacy: %+v", desc, o)
			}
		}
		for _, tag := range splitTags(joinTags(splitTags(tags))) {
			if !pveTag.MatchString(tag) {
				t.Fatalf("joinTags wrote %q, which PVE refuses", tag)
			}
		}
	})
}

// FuzzDecodeResponses: PVE's answers (VM status, resource rows, configs) decode without panics
// whatever their JSON types, numbers decode to what they say, and disk sizes and boot disks are
// read from any config without panics.
func FuzzDecodeResponses(f *testing.F) {
	f.Add([]byte(`{"name":"vm","status":"running","qmpstatus":"running","tags":"hyperfleet;hf-o-0","cpus":2,"maxmem":"2147483648","uptime":12}`))
	f.Add([]byte(`[{"type":"qemu","vmid":"105","node":"pve1","template":1,"maxdisk":null,"tags":"a;b"}]`))
	f.Add([]byte(`{"scsi0":"local-lvm:vm-105-disk-0,size=32G","boot":"order=scsi0;ide2;net0","memory":"2048","ide3":"local:iso/x.iso,media=cdrom"}`))
	f.Add([]byte(`{"cpus":true,"maxmem":1e400,"uptime":"-3"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var st vmStatus
		if json.Unmarshal(body, &st) == nil {
			_ = powerState(st.Status, st.QMPStatus)
			_ = splitTags(st.Tags)
		}
		var rows []vmResource
		_ = json.Unmarshal(body, &rows)
		var raw map[string]json.RawMessage
		if json.Unmarshal(body, &raw) == nil {
			cfg := make(map[string]string, len(raw))
			for k, v := range raw {
				var s string
				if json.Unmarshal(v, &s) != nil {
					s = string(v)
				}
				cfg[k] = s
			}
			disk := bootDisk(cfg)
			if disk != "" {
				if _, ok := cfg[disk]; !ok {
					t.Fatalf("boot disk %q is not in the config", disk)
				}
			}
			for _, v := range cfg {
				_, _ = driveSizeGiB(v)
			}
		}
		var n number
		if err := n.UnmarshalJSON(body); err == nil {
			s := strings.Trim(string(body), `"`)
			if f, perr := strconv.ParseFloat(s, 64); perr == nil && float64(n) != f {
				t.Fatalf("number %s decoded as %v", body, float64(n))
			}
		}
	})
}
