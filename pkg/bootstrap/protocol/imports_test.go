package protocol_test

import (
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const module = "github.com/hyperfleet-io/hyperfleet/"

// TestServerSideDoesNotLinkTheAgent keeps the wire contract in this package: server-side code
// speaks to the agent through protocol alone, and the manager carries no TPM device code.
func TestServerSideDoesNotLinkTheAgent(t *testing.T) {
	agentPkgs := []string{module + "pkg/agent", module + "pkg/agent/tpm"}
	for _, tc := range []struct {
		pkg       string
		forbidden []string
	}{
		{pkg: "cmd/manager", forbidden: append(agentPkgs, "github.com/google/go-tpm/")},
		{pkg: "cmd/bootstrap-service", forbidden: append(agentPkgs, "github.com/google/go-tpm/tpm2/transport/linuxtpm")},
		{pkg: "controllers", forbidden: agentPkgs},
		{pkg: "pkg/bootstrap", forbidden: agentPkgs},
		{pkg: "pkg/bootstrap/service", forbidden: agentPkgs},
		{pkg: "pkg/identity/...", forbidden: agentPkgs},
	} {
		t.Run(tc.pkg, func(t *testing.T) {
			g := NewWithT(t)
			out, err := exec.Command("go", "list", "-deps", module+tc.pkg).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), string(out))
			for _, dep := range strings.Fields(string(out)) {
				for _, f := range tc.forbidden {
					if strings.HasSuffix(f, "/") {
						g.Expect(dep).NotTo(HavePrefix(f), "%s links %s", tc.pkg, dep)
					} else {
						g.Expect(dep).NotTo(Equal(f), "%s links %s", tc.pkg, dep)
					}
				}
			}
		})
	}
}
