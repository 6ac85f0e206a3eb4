package proxmox

import (
	"regexp"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

var pveTag = regexp.MustCompile(`^[a-z0-9_][a-z0-9_\-+.]*$`)

func testOwner() hypervisor.Ownership {
	return hypervisor.Ownership{Cluster: "fleet/pve-a", ClaimNamespace: "runners", ClaimName: "ubuntu-x64.abc12", ClaimID: "6f1c2d3e0a1b4c5d"}
}

func unitProvider(t *testing.T, cluster string) *Provider {
	t.Helper()
	p, err := New(Config{Endpoint: "https://pve.example:8006", TokenID: "hf@pve!ci", TokenSecret: "x", Cluster: cluster, InstallationID: testInstallation})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestOwnerTagIsStableAndValid(t *testing.T) {
	g := NewWithT(t)
	for _, c := range []string{"fleet/pve-a", "Weird Name/ÜBER", ""} {
		tag := OwnerTag(testInstallation, c)
		g.Expect(tag).To(MatchRegexp(`^hf-o-[0-9a-f]{16}$`))
		g.Expect(tag).To(Equal(OwnerTag(testInstallation, c)))
		g.Expect(ClusterTag(c)).To(MatchRegexp(`^hf-c-[0-9a-f]{8}$`))
	}
	g.Expect(OwnerTag(testInstallation, "fleet/pve-a")).NotTo(Equal(OwnerTag(testInstallation, "fleet/pve-b")))
	// Another installation with identically named objects has another tag, and an ID copied into
	// another namespace's HypervisorCluster does not give that namespace the tag.
	g.Expect(OwnerTag("fedcba9876543210", "fleet/pve-a")).NotTo(Equal(OwnerTag(testInstallation, "fleet/pve-a")))
	g.Expect(OwnerTag(testInstallation, "other/pve-a")).NotTo(Equal(OwnerTag(testInstallation, "fleet/pve-a")))
}

// TestSecondInstallationSeesNoOwnership: a second installation with the same HypervisorCluster
// namespace/name reads neither the first one's tags nor its description as its own.
func TestSecondInstallationSeesNoOwnership(t *testing.T) {
	g := NewWithT(t)
	prod := unitProvider(t, "fleet/pve-a")
	staging, err := New(Config{Endpoint: "https://pve.example:8006", TokenID: "hf@pve!ci", TokenSecret: "x",
		Cluster: "fleet/pve-a", InstallationID: "fedcba9876543210"})
	g.Expect(err).NotTo(HaveOccurred())
	tags := splitTags(joinTags(ownershipTags(prod.ownerTag, testOwner())))
	owner, verdict := staging.ownerFromTags(tags)
	g.Expect(owner).To(BeNil())
	g.Expect(verdict).To(Equal(otherCluster))
	g.Expect(staging.ownerFromDescription(prod.describe(testOwner(), ""))).To(BeNil())
}

// TestLegacyMarksAreReadAsLegacy: tags and descriptions written before installation identities are
// recognised (for adoption) but never as this installation's own.
func TestLegacyMarksAreReadAsLegacy(t *testing.T) {
	g := NewWithT(t)
	p := unitProvider(t, "fleet/pve-a")
	const uid = "6f1c2d3e-0a1b-4c5d-8e9f-001122334455"
	old := []string{TagManaged, ClusterTag("fleet/pve-a"), "hf-claim-runners.ubuntu-x64.abc12", "hf-uid-" + uid, "ci"}
	owner, verdict := p.ownerFromTags(old)
	g.Expect(verdict).To(Equal(legacy))
	g.Expect(owner).To(Equal(&hypervisor.Ownership{Cluster: "fleet/pve-a", ClaimNamespace: "runners",
		ClaimName: "ubuntu-x64.abc12", Legacy: true, LegacyClaimUID: uid}))
	// Another namespace/name's legacy VM is not even a candidate.
	_, verdict = p.ownerFromTags([]string{TagManaged, ClusterTag("fleet/pve-b"), "hf-uid-" + uid})
	g.Expect(verdict).To(Equal(otherCluster))

	desc := "HyperFleet runner VM.\n\n```hyperfleet\nmanaged-by: hyperfleet\ncluster: fleet/pve-a\ncluster-tag: " +
		ClusterTag("fleet/pve-a") + "\nclaim: runners/ubuntu-x64.abc12\nclaim-uid: " + uid + "\n```"
	g.Expect(p.ownerFromDescription(desc)).To(Equal(owner))
}

func TestOwnershipRoundTripsThroughTags(t *testing.T) {
	g := NewWithT(t)
	p := unitProvider(t, "fleet/pve-a")
	tags := splitTags(joinTags(ownershipTags(p.ownerTag, testOwner()), []string{"Runner", "x64"}))
	for _, tag := range tags {
		g.Expect(tag).To(MatchRegexp(pveTag.String()))
	}
	owner, verdict := p.ownerFromTags(tags)
	g.Expect(verdict).To(Equal(ours))
	g.Expect(*owner).To(Equal(testOwner()))

	other := unitProvider(t, "fleet/pve-b")
	owner, verdict = other.ownerFromTags(tags)
	g.Expect(owner).To(BeNil())
	g.Expect(verdict).To(Equal(otherCluster))

	owner, verdict = p.ownerFromTags([]string{"runner", "template"})
	g.Expect(owner).To(BeNil())
	g.Expect(verdict).To(Equal(untagged))

	// The managed tag alone (someone copied it) is not enough.
	owner, _ = p.ownerFromTags([]string{TagManaged})
	g.Expect(owner).To(BeNil())
}

func TestSanitizeTag(t *testing.T) {
	for in, want := range map[string]string{
		"runners":     "runners",
		"Ubuntu_X64":  "ubuntu_x64",
		"-leading":    "_leading",
		"a b/c":       "a_b_c",
		"v1.2+build-": "v1.2+build-",
	} {
		t.Run(in, func(t *testing.T) {
			NewWithT(t).Expect(sanitizeTag(in)).To(Equal(want))
		})
	}
}

func TestDescriptionBlock(t *testing.T) {
	g := NewWithT(t)
	p := unitProvider(t, "fleet/pve-a")
	desc := p.describe(testOwner(), "Runner for ubuntu-x64")
	g.Expect(desc).To(HavePrefix("Runner for ubuntu-x64\n\n```hyperfleet\n"))
	g.Expect(desc).To(ContainSubstring("claim: runners/ubuntu-x64.abc12\n"))
	g.Expect(*p.ownerFromDescription(desc)).To(Equal(testOwner()))
	g.Expect(unitProvider(t, "fleet/pve-b").ownerFromDescription(desc)).To(BeNil())
	g.Expect(p.ownerFromDescription("a hand-written note")).To(BeNil())

	long := p.describe(testOwner(), string(make([]byte, 2*maxDescription)))
	g.Expect(len(long)).To(BeNumerically("<=", maxDescription))
	g.Expect(p.ownerFromDescription(long)).NotTo(BeNil())
}

func TestMACIsStablePerVMAndLocallyAdministered(t *testing.T) {
	g := NewWithT(t)
	p := unitProvider(t, "fleet/pve-a")
	mac := p.macFor(hypervisor.VMRef{Node: "pve1", ID: "105"})
	g.Expect(mac).To(MatchRegexp(`^02(:[0-9A-F]{2}){5}$`))
	g.Expect(p.macFor(hypervisor.VMRef{Node: "pve2", ID: "105"})).To(Equal(mac))
	g.Expect(p.macFor(hypervisor.VMRef{Node: "pve1", ID: "106"})).NotTo(Equal(mac))
}

func TestConfigValidationAndEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr bool
		want    string
	}{
		{"host only", Config{Endpoint: "https://pve:8006", TokenID: "a@pve!t", TokenSecret: "s", Cluster: "c", InstallationID: "i"}, false, "https://pve:8006/api2/json"},
		{"api base", Config{Endpoint: "https://pve:8006/api2/json/", Username: "root@pam", Password: "p", Cluster: "c", InstallationID: "i"}, false, "https://pve:8006/api2/json"},
		{"no credentials", Config{Endpoint: "https://pve:8006", Cluster: "c", InstallationID: "i"}, true, ""},
		{"bad token id", Config{Endpoint: "https://pve:8006", TokenID: "token", TokenSecret: "s", Cluster: "c", InstallationID: "i"}, true, ""},
		{"no cluster", Config{Endpoint: "https://pve:8006", TokenID: "a@pve!t", TokenSecret: "s", InstallationID: "i"}, true, ""},
		{"no installation ID", Config{Endpoint: "https://pve:8006", TokenID: "a@pve!t", TokenSecret: "s", Cluster: "c"}, true, ""},
		{"plain http", Config{Endpoint: "http://pve:8006", TokenID: "a@pve!t", TokenSecret: "s", Cluster: "c", InstallationID: "i"}, true, ""},
		{"plain http allowed", Config{Endpoint: "http://pve:8006", TokenID: "a@pve!t", TokenSecret: "s", Cluster: "c", InstallationID: "i",
			AllowInsecureHTTP: true}, false, "http://pve:8006/api2/json"},
		{"not a url", Config{Endpoint: "pve:8006", TokenID: "a@pve!t", TokenSecret: "s", Cluster: "c", InstallationID: "i"}, true, ""},
		{"bad CA", Config{Endpoint: "https://pve:8006", TokenID: "a@pve!t", TokenSecret: "s", Cluster: "c", InstallationID: "i", CABundle: []byte("nope")}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p, err := New(tc.cfg)
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.cfg.Endpoint).To(Equal(tc.want))
			g.Expect(p.cfg.Timeout).To(Equal(DefaultTimeout))
			g.Expect(p.cfg.ISOStorage).To(Equal(DefaultISOStorage))
		})
	}
}

func TestConfigHashChangesWithCredentials(t *testing.T) {
	g := NewWithT(t)
	a := Config{Endpoint: "https://pve:8006", TokenID: "a@pve!t", TokenSecret: "s1", Cluster: "c", InstallationID: "i"}
	b := a
	b.TokenSecret = "s2"
	g.Expect(a.Hash()).To(Equal(a.Hash()))
	g.Expect(a.Hash()).NotTo(Equal(b.Hash()))
	g.Expect(a.Hash()).NotTo(ContainSubstring("s1"))
}
