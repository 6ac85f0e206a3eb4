package cloudinit

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

func TestMergeCloudConfigs(t *testing.T) {
	g := NewWithT(t)
	base := "#cloud-config\npackages: [git]\nruncmd:\n- echo template\ntimezone: UTC\nusers:\n- name: ops\nwrite_files:\n- path: /etc/a\n  content: a\n"
	overlay := "#cloud-config\nruncmd:\n- echo bootstrap\ntimezone: Europe/Berlin\nwrite_files:\n- path: /etc/hyperfleet/agent.yaml\n  content: token\n"
	out, err := Merge(base, overlay)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(HavePrefix("#cloud-config\n"))
	var m map[string]any
	g.Expect(yaml.Unmarshal([]byte(out), &m)).To(Succeed())
	g.Expect(m["runcmd"]).To(Equal([]any{"echo template", "echo bootstrap"}), "lists concatenate, template first")
	g.Expect(m["timezone"]).To(Equal("Europe/Berlin"), "bootstrap wins on scalars")
	g.Expect(m["packages"]).To(Equal([]any{"git"}), "template-only keys survive")
	g.Expect(m["write_files"]).To(HaveLen(2))
	g.Expect(m["users"]).To(HaveLen(1))
}

func TestMergeEmptyParts(t *testing.T) {
	g := NewWithT(t)
	out, err := Merge("", "#cloud-config\na: 1\n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("#cloud-config\na: 1\n"))
	out, err = Merge("#!/bin/sh\necho hi\n", "  ")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("#!/bin/sh\necho hi\n"))
}

func TestMergeScriptMakesMultipart(t *testing.T) {
	g := NewWithT(t)
	out, err := Merge("#cloud-config\npackages: [git]\n", "#!/bin/sh\n/usr/local/bin/hyperfleet-agent\n")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(HavePrefix("Content-Type: multipart/mixed; boundary="))
	g.Expect(out).To(ContainSubstring("Content-Type: text/cloud-config"))
	g.Expect(out).To(ContainSubstring("Content-Type: text/x-shellscript"))
	g.Expect(strings.Index(out, "packages")).To(BeNumerically("<", strings.Index(out, "hyperfleet-agent")))
}

func TestMergeInvalidYAML(t *testing.T) {
	g := NewWithT(t)
	_, err := Merge("#cloud-config\nruncmd: [unclosed\n", "#cloud-config\na: 1\n")
	g.Expect(err).To(MatchError(ContainSubstring("template user-data is not valid YAML")))
}
