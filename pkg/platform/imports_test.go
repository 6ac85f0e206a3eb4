package platform_test

import (
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const module = "github.com/hyperfleet-io/hyperfleet/"

// TestCallersSeeOnePlatformSeam: the controllers and the bootstrap service reach CI platforms
// through platform.Source alone. The GitHub implementation and the instrumentation are linked
// where each process is assembled (pkg/manager, cmd/bootstrap-service), never by their callers, so a
// second platform or a second wrapper cannot creep in beside them.
func TestCallersSeeOnePlatformSeam(t *testing.T) {
	forbidden := []string{module + "pkg/platform/github", module + "pkg/platform/instrumented", "github.com/google/go-github/"}
	for _, pkg := range []string{"controllers", "pkg/bootstrap/service", "pkg/demand"} {
		t.Run(pkg, func(t *testing.T) {
			g := NewWithT(t)
			out, err := exec.Command("go", "list", "-deps", module+pkg).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), string(out))
			deps := strings.Fields(string(out))
			g.Expect(deps).To(ContainElement(module + "pkg/platform"))
			for _, dep := range deps {
				for _, f := range forbidden {
					g.Expect(strings.HasPrefix(dep, f)).To(BeFalse(), "%s links %s", pkg, dep)
				}
			}
		})
	}
}
