package provenance_test

import (
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const module = "github.com/hyperfleet-io/hyperfleet/"

// TestVerifierNeedsOnlyTheStandardLibrary: anyone must be able to check a record with a small
// static binary, so the signing and verifying code and the verifier command link nothing outside
// the standard library; the Kubernetes key custody lives in its own package.
func TestVerifierNeedsOnlyTheStandardLibrary(t *testing.T) {
	g := NewWithT(t)
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}",
		module+"pkg/provenance", module+"cmd/hyperfleet-verify").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	deps := strings.Fields(string(out))
	g.Expect(deps).To(ContainElement(module + "pkg/provenance"))
	g.Expect(deps).To(ConsistOf(module+"pkg/provenance", module+"cmd/hyperfleet-verify"))
}
