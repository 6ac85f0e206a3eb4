package proxmox

import (
	"regexp"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

var pveTag = regexp.MustCompile(`^[a-z0-9_][a-z0-9_\-+.]*$`)

func testOwner() hypervisor.Ownership {
	return hypervisor.Ownership{Cluster: "fleet/pve-a", ClaimNamespace: "runners", ClaimName: "ubuntu-x64.abc12", ClaimUID: "6f1c2d3e-0a1b-4c5d-8e9f-001122334455"}
}

func unitProvider(t *testing.T, cluster string) *Provider {
	t.Helper()
	p, err := New(Config{Endpoint: "https://pve.example:8006", TokenID: "hf@pve!ci", TokenSecret: "x", Cluster: cluster})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestClusterTagIsStableAndValid(t *testing.T) {
	g := NewWithT(t)
	for _, c := range []string{"fleet/pve-a", "Weird Name/ÜBER", ""} {
		tag := ClusterTag(c)
		g.Expect(tag).To(MatchRegexp(`^hf-c-[0-9a-f]{8}$`))
		g.Expect(tag).To(Equal(ClusterTag(c)))
	}
	g.Expect(ClusterTag("fleet/pve-a")).NotTo(Equal(ClusterTag("fleet/pve-b")))
}

func TestOwnershipRoundTripsThroughTags(t *testing.T) {
	g := NewWithT(t)
	p := unitProvider(t, "fleet/pve-a")
	tags := splitTags(joinTags(ownershipTags(p.clusterTag, testOwner()), []string{"Runner", "x64"}))
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
	mac := p.macFor(hypervisor.VMRef{Node: "pve1", ID: 105})
	g.Expect(mac).To(MatchRegexp(`^02(:[0-9A-F]{2}){5}$`))
	g.Expect(p.macFor(hypervisor.VMRef{Node: "pve2", ID: 105})).To(Equal(mac))
	g.Expect(p.macFor(hypervisor.VMRef{Node: "pve1", ID: 106})).NotTo(Equal(mac))
}

func TestConfigValidationAndEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		wantErr bool
		want    string
	}{
		{"host only", Config{Endpoint: "https://pve:8006", TokenID: "a@pve!t", TokenSecret: "s", Cluster: "c"}, false, "https://pve:8006/api2/json"},
		{"api base", Config{Endpoint: "https://pve:8006/api2/json/", Username: "root@pam", Password: "p", Cluster: "c"}, false, "https://pve:8006/api2/json"},
		{"no credentials", Config{Endpoint: "https://pve:8006", Cluster: "c"}, true, ""},
		{"bad token id", Config{Endpoint: "https://pve:8006", TokenID: "token", TokenSecret: "s", Cluster: "c"}, true, ""},
		{"no cluster", Config{Endpoint: "https://pve:8006", TokenID: "a@pve!t", TokenSecret: "s"}, true, ""},
		{"not a url", Config{Endpoint: "pve:8006", TokenID: "a@pve!t", TokenSecret: "s", Cluster: "c"}, true, ""},
		{"bad CA", Config{Endpoint: "https://pve:8006", TokenID: "a@pve!t", TokenSecret: "s", Cluster: "c", CABundle: []byte("nope")}, true, ""},
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
	a := Config{Endpoint: "https://pve:8006", TokenID: "a@pve!t", TokenSecret: "s1", Cluster: "c"}
	b := a
	b.TokenSecret = "s2"
	g.Expect(a.Hash()).To(Equal(a.Hash()))
	g.Expect(a.Hash()).NotTo(Equal(b.Hash()))
	g.Expect(a.Hash()).NotTo(ContainSubstring("s1"))
}
