package installed

import (
	"bytes"
	"context"
	"os"
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

// waitAvailable waits until every Deployment of ns is Available; when one is not in time it
// prints what its pods say (status, events, the last logs of each container) before failing.
func waitAvailable(t *testing.T, ns string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout+30*time.Second)
	defer cancel()
	out, err := theNode.Kubectl(ctx, nil, "-n", ns, "wait", "--for=condition=Available", "deployment", "--all", "--timeout="+timeout.String())
	if err == nil {
		return
	}
	t.Logf("Deployments of %s not Available within %s: %v\n%s", ns, timeout, err, out)
	dumpPods(t, ns)
	t.FailNow()
}

// dumpPods logs the pods of ns: their status, events and the last lines of every container's log.
func dumpPods(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"-n", ns, "get", "pods", "-o", "wide"},
		{"-n", ns, "describe", "pods"},
		{"-n", ns, "logs", "--all-containers", "--prefix", "--tail=40", "-l", "app.kubernetes.io/name=hyperfleet"},
	} {
		out, err := theNode.Kubectl(ctx, nil, args...)
		t.Logf("kubectl %s (%v):\n%s", strings.Join(args, " "), err, out)
	}
	// The kubelet's own copies of the containers' output (kubectl logs needs the node's name to
	// resolve, which it does not here).
	logs, _ := filepath.Glob(filepath.Join(nodeDir, "pod-logs", ns+"_*", "*", "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if len(b) > 4096 {
			b = b[len(b)-4096:]
		}
		t.Logf("%s (%v):\n%s", strings.TrimPrefix(l, nodeDir+"/"), err, b)
	}
}
