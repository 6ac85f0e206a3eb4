package packaging

import (
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestAgentReleaseBinaries builds the agent as hack/release-agent.sh does for a release: a static
// Linux binary per architecture a VM template may have, with checksums a BootstrapConfigTemplate's
// spec.agent.sha256 takes.
func TestAgentReleaseBinaries(t *testing.T) {
	g := NewWithT(t)
	out := t.TempDir()
	run(t, nil, []string{"RELEASE_TAG=v0.1.0"}, filepath.Join(env.RepoRoot, "hack", "release-agent.sh"), out)

	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(mustRead(t, filepath.Join(out, "SHA256SUMS")))), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		g.Expect(ok).To(BeTrue(), "SHA256SUMS line %q", line)
		sums[name] = sum
	}
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		name := "hyperfleet-agent-linux-" + arch
		path := filepath.Join(out, name)
		f, err := elf.Open(path)
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(f.Machine).To(Equal(machine), name)
		for _, p := range f.Progs {
			g.Expect(p.Type).NotTo(Equal(elf.PT_INTERP), "%s must be static: it names a dynamic loader", name)
		}
		libs, err := f.ImportedLibraries()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(libs).To(BeEmpty(), "%s links shared libraries", name)
		_ = f.Close()

		data, err := os.ReadFile(path)
		g.Expect(err).NotTo(HaveOccurred())
		sum := sha256.Sum256(data)
		g.Expect(sums).To(HaveKeyWithValue(name, hex.EncodeToString(sum[:])))
	}
	// The amd64 build runs here: it says which release it is.
	g.Expect(string(run(t, nil, nil, filepath.Join(out, "hyperfleet-agent-linux-amd64"), "--version"))).To(Equal("hyperfleet-agent v0.1.0\n"))
}
