package node

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNodeRunsAPod starts the node and runs a pod of the node's own pause image on it.
func TestNodeRunsAPod(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Kubernetes node")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: the node needs root (CI runs as root)")
	}
	home, _ := os.UserHomeDir()
	cache := filepath.Join(home, ".cache", "hyperfleet", "tools")
	if c := os.Getenv("TOOLS_CACHE"); c != "" {
		cache = c
	}
	root, _ := filepath.Abs("../..")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	n, err := Start(ctx, Options{Dir: t.TempDir(), K8sBin: filepath.Join(cache, "k8s"), NodeBin: filepath.Join(cache, "node"), RepoRoot: root, Log: os.Stdout})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	pod := `apiVersion: v1
kind: Pod
metadata: {name: sleeper, namespace: default}
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 65532, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: pause
    image: ` + PauseImage + `
    imagePullPolicy: Never
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`
	if out, err := n.Kubectl(ctx, strings.NewReader(pod), "apply", "-f", "-"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if out, err := n.Kubectl(ctx, nil, "wait", "--for=condition=Ready", "pod/sleeper", "--timeout=90s"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
}
