package platform_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const module = "github.com/hyperfleet-io/hyperfleet/"

// TestCallersSeeOnePlatformSeam: the controllers, the receiver and the bootstrap service reach CI
// platforms through platform.Source alone. The platform implementations and the instrumentation
// are linked where each process is assembled (pkg/manager, cmd/bootstrap-service), never by
// their callers, so a second platform or a second wrapper cannot creep in beside them.
func TestCallersSeeOnePlatformSeam(t *testing.T) {
	forbidden := append(platformPackages(), module+"pkg/platform/instrumented", module+"pkg/platform/all")
	for _, pkg := range []string{"controllers", "pkg/bootstrap/service", "pkg/demand", "pkg/webhook", "pkg/console"} {
		t.Run(pkg, func(t *testing.T) {
			g := NewWithT(t)
			out, err := exec.Command("go", "list", "-deps", module+pkg).CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), string(out))
			deps := strings.Fields(string(out))
			g.Expect(deps).To(ContainElement(module + "pkg/platform"))
			for _, dep := range deps {
				for _, f := range forbidden {
					g.Expect(dep == f || strings.HasPrefix(dep, f+"/")).To(BeFalse(), "%s links %s", pkg, dep)
				}
			}
		})
	}
}

// TestTheAgentLinksNoPlatformClient: the in-VM agent starts each platform's runner through its
// launch package alone; no platform's API client or manager-side package reaches a runner VM.
func TestTheAgentLinksNoPlatformClient(t *testing.T) {
	g := NewWithT(t)
	out, err := exec.Command("go", "list", "-deps", module+"cmd/hyperfleet-agent").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	deps := strings.Fields(string(out))
	for _, name := range []string{"github", "gitlab", "buildkite"} {
		g.Expect(deps).To(ContainElement(module+"pkg/platform/"+name+"/launch"), "the agent cannot start %s runners", name)
	}
	for _, dep := range deps {
		for _, plat := range platformPackages() {
			if dep == plat+"/launch" {
				continue
			}
			g.Expect(dep == plat || strings.HasPrefix(dep, plat+"/")).To(BeFalse(), "the agent links %s", dep)
		}
	}
}

// platformPackages are the packages that name one platform's types: its HyperFleet package and
// the API client it is built on.
func platformPackages() []string {
	return []string{
		module + "pkg/platform/github", "github.com/google/go-github",
		module + "pkg/platform/gitlab", "gitlab.com/gitlab-org/api/client-go",
		module + "pkg/platform/buildkite", "github.com/buildkite/go-buildkite",
	}
}

// importAllowed lists who may import a platform's package besides the package itself and its
// fake: the registration file, and test or dev-environment code that drives the GitHub client
// against the fake GitHub directly:
//   - pkg/platform/all registers every platform (the one registration file), and
//     pkg/platform/all/launches every platform's runner launch in the agent;
//   - pkg/platform/instrumented's tests trace the real GitHub client;
//   - the RunnerPool controller's tests register a runner as another party would, with the App's client;
//   - internal/devfleet, the local development fleet, writes the fake GitHub App's and the fake
//     GitLab's Secret keys, and names a GitLab job's Machine from its runner's description;
//   - test/scale, the bench-scale and soak harness, writes the fake GitHub App's Secret keys.
var importAllowed = map[string][]string{
	module + "pkg/platform/all":          {"*"},
	module + "pkg/platform/all/launches": {"*"},
	module + "pkg/platform/instrumented": {module + "pkg/platform/github"},
	module + "controllers/runnerpool":    {module + "pkg/platform/github"},
	module + "internal/devfleet":         {module + "pkg/platform/github", module + "pkg/platform/gitlab"},
	module + "test/scale":                {module + "pkg/platform/github"},
}

// TestNoOneElseNamesAPlatform: nothing outside pkg/platform/<name> and test/fake<name> imports a
// platform's package or its API client (tests included), except what importAllowed lists, so
// the controllers, the receiver, the bootstrap service and the agent stay platform-neutral.
func TestNoOneElseNamesAPlatform(t *testing.T) {
	g := NewWithT(t)
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports", module+"...")
	out, err := cmd.Output()
	g.Expect(err).NotTo(HaveOccurred())
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		}
		g.Expect(err).NotTo(HaveOccurred())
		checked++
		for _, imp := range append(append(p.Imports, p.TestImports...), p.XTestImports...) {
			for _, plat := range platformPackages() {
				if imp != plat && !strings.HasPrefix(imp, plat+"/") {
					continue
				}
				g.Expect(ownsPlatform(p.ImportPath, plat) || allowed(p.ImportPath, plat)).To(BeTrue(),
					"%s imports %s: reach platforms through platform.Source and platform.Lookup", p.ImportPath, imp)
			}
		}
	}
	g.Expect(checked).To(BeNumerically(">", 50))
}

// ownsPlatform reports whether pkg is the platform's own package (or below it) or its fakes
// (test/fake<name>...), and plat belongs to that platform.
func ownsPlatform(pkg, plat string) bool {
	for _, name := range []string{"github", "gitlab", "buildkite"} {
		own := module + "pkg/platform/" + name
		if pkg != own && !strings.HasPrefix(pkg, own+"/") && !strings.HasPrefix(pkg, module+"test/fake"+name) {
			continue
		}
		if platformOf[plat] == name {
			return true
		}
	}
	return false
}

// platformOf names the platform of each of platformPackages.
var platformOf = map[string]string{
	module + "pkg/platform/github": "github", "github.com/google/go-github": "github",
	module + "pkg/platform/gitlab": "gitlab", "gitlab.com/gitlab-org/api/client-go": "gitlab",
	module + "pkg/platform/buildkite": "buildkite", "github.com/buildkite/go-buildkite": "buildkite",
}

func allowed(pkg, plat string) bool {
	for _, a := range importAllowed[pkg] {
		if a == "*" || a == plat {
			return true
		}
	}
	return false
}
