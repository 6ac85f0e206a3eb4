package testenv

import (
	"os/exec"
	"testing"
)

// SystemPython is Debian's interpreter, the one python3-winrm and python3-gitlab install into
// (hack/prereqs.sh): the first python3 on PATH may be another without them.
const SystemPython = "/usr/bin/python3"

// RequirePython fails the test unless SystemPython imports every module named, with the Debian
// package that brings them: the conformance a client nobody here wrote checks is not optional.
func RequirePython(t testing.TB, debianPackage string, modules ...string) string {
	t.Helper()
	for _, m := range modules {
		if out, err := exec.Command(SystemPython, "-c", "import "+m).CombinedOutput(); err != nil {
			t.Fatalf("install %s (hack/prereqs.sh): %s cannot import %s: %v: %s", debianPackage, SystemPython, m, err, out)
		}
	}
	return SystemPython
}
