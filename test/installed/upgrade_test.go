package installed

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// previousVersion is what the upgrade test calls the release it upgrades from: the commit before
// the last one that changed HyperFleet's CRDs, its images built from that commit's sources.
const previousVersion = "v0.0.9"

// TestUpgradeFromThePreviousRelease runs the upgrade a user makes with `clusterctl upgrade apply`,
// with jobs in flight: HyperFleet's providers deleted (`clusterctl delete`, which keeps the CRDs,
// the namespace and every object of the runner fleet), the previous release installed with
// `clusterctl init` (its CRDs over today's, as they were stored before), a burst of jobs queued and
// the upgrade applied once their first VM exists. Every job runs exactly once, every VM goes, the
// pods run today's images, and every object of the fleet reads at its stored version.
func TestUpgradeFromThePreviousRelease(t *testing.T) {
	g := NewWithT(t)
	f := installedFleet(t)
	old := previousRelease(t)
	t.Logf("upgrading from %s (%s), the commit before the last that changed the CRDs", previousVersion, old.commit[:12])
	repo := t.TempDir()
	config := localRepository(t, third, repo)
	addPreviousRelease(t, old, repo)
	env := append(releaseVariables(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "XDG_CONFIG_HOME="+t.TempDir(), "HOME="+t.TempDir())
	clusterctl := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, tools.Clusterctl(), append(args, "--config", config, "--kubeconfig", theNode.AdminKubeconfig)...)
		cmd.Env = append(cmd.Environ(), env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("clusterctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	start := time.Now()
	clusterctl("delete", "--infrastructure", "hyperfleet", "--bootstrap", "hyperfleet")
	clusterctl("init", "--infrastructure", "hyperfleet:"+previousVersion, "--bootstrap", "hyperfleet:"+previousVersion,
		"--wait-providers", "--wait-provider-timeout", "300")
	// The previous release has no HYPERFLEET_BOOTSTRAP_SERVICE_IPS: its users added the address
	// VMs dial to the bootstrap service's certificate with --ip, as docs/install.md said then.
	kubectl(t, nil, "-n", systemNS, "patch", "deployment", "hyperfleet-bootstrap-service", "--type=json", "-p",
		`[{"op":"add","path":"/spec/template/spec/containers/0/args/-","value":"--ip=`+theNode.Gateway.String()+`"}]`)
	kubectl(t, nil, "-n", systemNS, "rollout", "status", "deployment", "hyperfleet-bootstrap-service", "--timeout=180s")
	expectLeaseHeld(t, systemNS, start)
	g.Expect(podImages(t)).To(ContainElement(ContainSubstring(":"+previousVersion)), "the previous release runs")
	t.Logf("today's providers deleted and %s installed in %.1fs", previousVersion, time.Since(start).Seconds())

	start = time.Now()
	runJobs(t, f, 4, func() {
		waitFirstVM(t, f)
		up := time.Now()
		out := clusterctl("upgrade", "apply", "--infrastructure", "hyperfleet:v0.1.0", "--bootstrap", "hyperfleet:v0.1.0",
			"--wait-providers", "--wait-provider-timeout", "300")
		t.Logf("clusterctl upgrade apply with jobs in flight, %.1fs:\n%s", time.Since(up).Seconds(), out)
	})
	t.Logf("4 jobs queued to all completed across the upgrade in %.1fs", time.Since(start).Seconds())
	expectFloor(t, f)
	expectAllReady(t, systemNS, time.Time{})
	for _, img := range podImages(t) {
		g.Expect(img).NotTo(ContainSubstring(":"+previousVersion), "every pod runs today's images after the upgrade")
	}
	got := kubectl(t, nil, "get", "providers.clusterctl.cluster.x-k8s.io", "-A", "-o",
		`jsonpath={range .items[*]}{.type}/{.providerName}@{.version} {end}`)
	g.Expect(got).To(ContainSubstring("InfrastructureProvider/hyperfleet@v0.1.0"))
	g.Expect(got).To(ContainSubstring("BootstrapProvider/hyperfleet@v0.1.0"))

	// Every object of the fleet reads back, through today's CRDs, as it was stored.
	for _, kind := range []string{"hypervisorclusters", "machineclaimtemplates", "bootstrapconfigtemplates", "runnerpools", "clusters", "fleetcontrolplanes"} {
		out := kubectl(t, nil, "-n", "runners", "get", kind, "-o", "name")
		g.Expect(out).NotTo(BeEmpty(), "the fleet's %s survive the upgrade", kind)
	}
	// One more job on the upgraded release.
	runJobs(t, f, 1, nil)
	expectFloor(t, f)
}

// releaseVariables are the clusterctl variables every install of the package uses: VMs reach the
// bootstrap service on a NodePort of the node's address (job_test.go), which its certificate must
// name; runners' VMs go soon after they power off.
func releaseVariables() []string {
	return []string{
		"HYPERFLEET_BOOTSTRAP_SERVICE_URL=https://" + theNode.Gateway.String() + ":" + bootstrapNodePort,
		"HYPERFLEET_BOOTSTRAP_SERVICE_IPS=" + theNode.Gateway.String(),
		"HYPERFLEET_SWEEP_INTERVAL=5s",
		// A small fleet's repair interval: jobs whose deliveries were lost while the manager's pod
		// was replaced are dropped from the ledger within seconds, not a minute.
		"HYPERFLEET_REPAIR_INTERVAL=15s",
	}
}

// podImages lists the images of HyperFleet's pods.
func podImages(t *testing.T) []string {
	t.Helper()
	return strings.Fields(kubectl(t, nil, "-n", systemNS, "get", "pods", "-o", "jsonpath={.items[*].spec.containers[*].image}"))
}

// aRelease is a release of an earlier commit: its manifests and images.
type aRelease struct {
	commit   string
	manifest string // directory of its make release-manifests output
}

// previousRelease extracts the commit before the last one that changed config/crd, renders its
// release manifests with images tagged previousVersion, builds those images from its sources with
// today's hack/imagebuild, and imports them into the node.
func previousRelease(t *testing.T) aRelease {
	t.Helper()
	git := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("git", append([]string{"-C", repoRoot}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out))
	}
	if git("rev-parse", "--is-shallow-repository") == "true" {
		t.Skip("SKIPPED: a shallow clone has no earlier commit to upgrade from (git fetch --unshallow)")
	}
	last := git("log", "-1", "--format=%H", "--", "config/crd")
	old := git("rev-parse", last+"^")
	src := filepath.Join(t.TempDir(), "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", repoRoot, old, src))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("extracting %s: %v: %s", old, err, out)
	}
	rel := aRelease{commit: old, manifest: filepath.Join(t.TempDir(), "release")}
	render := exec.Command("make", "-C", src, "release-manifests", "RELEASE_DIR="+rel.manifest, "RELEASE_TAG="+previousVersion)
	render.Env = append(os.Environ(), "IMG=ghcr.io/hyperfleet-io/hyperfleet:"+previousVersion,
		"BOOTSTRAP_IMG=ghcr.io/hyperfleet-io/hyperfleet-bootstrap-service:"+previousVersion)
	if out, err := render.CombinedOutput(); err != nil {
		t.Fatalf("the previous release's manifests: %v: %s", err, out)
	}
	out := filepath.Join(t.TempDir(), "images")
	start := time.Now()
	build := exec.Command("go", "run", "./hack/imagebuild", "-root", src, "-out", out, "-platforms", "linux/"+goarch(),
		"-images", "manager,bootstrap-service", "-version", previousVersion, "-revision", old,
		"-source-date-epoch", git("log", "-1", "--format=%ct", old))
	build.Dir = repoRoot
	var stderr bytes.Buffer
	build.Stderr = &stderr
	if err := build.Run(); err != nil {
		t.Fatalf("the previous release's images: %v: %s", err, stderr.String())
	}
	t.Logf("the previous release's images built in %.1fs", time.Since(start).Seconds())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, name := range []string{"manager", "bootstrap-service"} {
		if err := theNode.ImportImage(ctx, filepath.Join(out, fmt.Sprintf("%s-linux-%s.tar", name, goarch()))); err != nil {
			t.Fatal(err)
		}
	}
	return rel
}

// addPreviousRelease puts rel into the local repository at repo as previousVersion, with a
// metadata.yaml whose release series covers it.
func addPreviousRelease(t *testing.T, rel aRelease, repo string) {
	t.Helper()
	meta := []byte(`apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Metadata
releaseSeries:
- major: 0
  minor: 1
  contract: v1beta2
- major: 0
  minor: 0
  contract: v1beta2
`)
	for _, p := range []struct{ label, file string }{{"infrastructure-hyperfleet", "infrastructure-components.yaml"}, {"bootstrap-hyperfleet", "bootstrap-components.yaml"}} {
		dir := filepath.Join(repo, p.label, previousVersion)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(rel.manifest, p.file))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p.file), b, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{previousVersion, "v0.1.0"} {
			if err := os.WriteFile(filepath.Join(repo, p.label, v, "metadata.yaml"), meta, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
