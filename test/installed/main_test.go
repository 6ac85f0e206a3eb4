package installed

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hyperfleet-io/hyperfleet/internal/node"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

// The node, the images and the release every test of the package shares.
var (
	theNode  *node.Node
	nodeDir  string // the node's files: its components' and pods' logs among them
	tools    testenv.Tools
	repoRoot string
	release  string // directory of `make release-manifests`' output
	images   map[string]string
	// toolsCache is hack/tools.sh's cache (helm is under bin/).
	toolsCache string
	// third is what clusterctl installs besides HyperFleet (clusterctl_test.go).
	third thirdParty
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		fmt.Println("installed: skipped under -short (starts a Kubernetes node)")
		return 0
	}
	if os.Geteuid() != 0 {
		// The kubelet, containerd and the pods' bridge need root; CI runs as root and never skips.
		fmt.Println("installed: SKIPPED: not root; the node needs root (CI runs these tests as root)")
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var err error
	if tools, err = testenv.FindTools(); err != nil {
		fmt.Fprintln(os.Stderr, "installed:", err)
		return 1
	}
	if repoRoot, err = testenv.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, "installed:", err)
		return 1
	}
	work, err := os.MkdirTemp("", "hf-installed-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "installed:", err)
		return 1
	}
	defer os.RemoveAll(work)

	start := time.Now()
	if images, err = buildImages(ctx, filepath.Join(work, "images")); err != nil {
		fmt.Fprintln(os.Stderr, "installed: images:", err)
		return 1
	}
	fmt.Printf("installed: images built in %.1fs\n", time.Since(start).Seconds())
	release = filepath.Join(work, "release")
	if out, err := exec.CommandContext(ctx, "make", "-C", repoRoot, "release-manifests", "RELEASE_DIR="+release).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "installed: release manifests: %v: %s\n", err, out)
		return 1
	}

	if toolsCache, err = testenv.ToolsCacheDir(); err != nil {
		fmt.Fprintln(os.Stderr, "installed:", err)
		return 1
	}
	if third, err = findThirdParty(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "installed:", err)
		return 1
	}
	start = time.Now()
	thirdImages, err := buildThirdPartyImages(ctx, third, filepath.Join(work, "third-party"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "installed: Cluster API's and cert-manager's images:", err)
		return 1
	}
	fmt.Printf("installed: Cluster API %s and cert-manager %s images built in %.1fs\n", third.capiVersion, third.certManagerVersion, time.Since(start).Seconds())
	nodeBin := os.Getenv("NODE_BIN")
	if nodeBin == "" {
		nodeBin = filepath.Join(toolsCache, "node")
	}
	start = time.Now()
	nodeDir = filepath.Join(work, "node")
	theNode, err = node.Start(ctx, node.Options{
		Dir: nodeDir, K8sBin: tools.Assets, NodeBin: nodeBin, RepoRoot: repoRoot, Log: os.Stdout,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "installed:", err)
		return 1
	}
	defer func() {
		if err := theNode.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "installed: stopping the node:", err)
		}
	}()
	fmt.Printf("installed: node Ready in %.1fs\n", time.Since(start).Seconds())
	start = time.Now()
	for _, archive := range append(thirdImages, images["manager"], images["bootstrap-service"], images["console"]) {
		if err := theNode.ImportImage(ctx, archive); err != nil {
			fmt.Fprintf(os.Stderr, "installed: importing %s: %v\n", archive, err)
			return 1
		}
	}
	fmt.Printf("installed: %d images imported in %.1fs\n", len(thirdImages)+len(images), time.Since(start).Seconds())
	defer stopFleet()
	return m.Run()
}

// buildImages builds the images for this machine's platform alone, as `make images` does, and
// returns each image's per-platform archive by name.
func buildImages(ctx context.Context, out string) (map[string]string, error) {
	cmd := exec.CommandContext(ctx, "go", "run", "./hack/imagebuild", "-out", out, "-platforms", "linux/"+goarch())
	cmd.Dir = repoRoot
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%v: %s", err, b)
	}
	m := map[string]string{}
	for _, name := range []string{"manager", "bootstrap-service", "console"} {
		m[name] = filepath.Join(out, fmt.Sprintf("%s-linux-%s.tar", name, goarch()))
		if _, err := os.Stat(m[name]); err != nil {
			return nil, err
		}
	}
	return m, nil
}
