package installed

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func goarch() string { return runtime.GOARCH }

// kubectl runs kubectl as the node's administrator and fails the test on error.
func kubectl(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var in *bytes.Reader
	if stdin != nil {
		in = bytes.NewReader(stdin)
	}
	var out []byte
	var err error
	if in != nil {
		out, err = theNode.Kubectl(ctx, in, args...)
	} else {
		out, err = theNode.Kubectl(ctx, nil, args...)
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// clusterctlGenerate renders a release file with clusterctl, variables at their defaults or the
// given values, as `clusterctl init` does before it applies.
func clusterctlGenerate(t *testing.T, file string, env ...string) []byte {
	t.Helper()
	cmd := exec.Command(filepath.Join(tools.CAPIDir, "clusterctl"), "generate", "yaml", "--from", file)
	cmd.Env = append(cmd.Environ(), append([]string{"CLUSTERCTL_DISABLE_VERSIONCHECK=true"}, env...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("clusterctl generate yaml --from %s: %v: %s", file, err, stderr.String())
	}
	return out
}
