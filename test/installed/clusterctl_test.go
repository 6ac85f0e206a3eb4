package installed

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// What `clusterctl init --infrastructure hyperfleet --bootstrap hyperfleet` installs besides
// HyperFleet: Cluster API's core and its kubeadm control plane (clusterctl adds both on a first
// init) and cert-manager (clusterctl installs it before any provider). hack/tools.sh --node builds
// each from the Go module proxy; here they become the images their manifests name, imported into
// the node, and a local clusterctl repository laid out as a user's would be.
type thirdParty struct {
	capiVersion, certManagerVersion string
	capiConfig, kcpConfig           string // Cluster API's kustomizations (config/, controlplane/kubeadm/config/)
	certManagerChart                string
}

func findThirdParty(ctx context.Context) (thirdParty, error) {
	out, err := exec.CommandContext(ctx, tools.Clusterctl(), "version", "-o", "short").Output()
	if err != nil {
		return thirdParty{}, fmt.Errorf("clusterctl version: %w", err)
	}
	tp := thirdParty{
		capiVersion:      strings.TrimSpace(string(out)),
		capiConfig:       filepath.Join(tools.CAPIDir, "config"),
		kcpConfig:        filepath.Join(tools.CAPIDir, "kcp-config"),
		certManagerChart: filepath.Join(toolsCache, "cert-manager", "chart"),
	}
	chart, err := os.ReadFile(filepath.Join(tp.certManagerChart, "Chart.yaml"))
	if err != nil {
		return tp, fmt.Errorf("cert-manager's chart: %w (run `make tools`: hack/tools.sh --node builds it)", err)
	}
	m := regexp.MustCompile(`(?m)^appVersion: (v\S+)$`).FindSubmatch(chart)
	if m == nil {
		return tp, fmt.Errorf("cert-manager's Chart.yaml names no appVersion")
	}
	tp.certManagerVersion = string(m[1])
	return tp, nil
}

// images returns the -wrap arguments of hack/imagebuild: each image under the name its manifest
// gives it, so nothing is rewritten on the way to the node.
func (tp thirdParty) images() []string {
	cm := filepath.Join(toolsCache, "cert-manager")
	return []string{
		"registry.k8s.io/cluster-api/cluster-api-controller:" + tp.capiVersion + "=/manager=" + filepath.Join(tools.CAPIDir, "capi-manager"),
		"registry.k8s.io/cluster-api/kubeadm-control-plane-controller:" + tp.capiVersion + "=/manager=" + filepath.Join(tools.CAPIDir, "kcp-manager"),
		"quay.io/jetstack/cert-manager-controller:" + tp.certManagerVersion + "=/controller=" + filepath.Join(cm, "controller"),
		"quay.io/jetstack/cert-manager-webhook:" + tp.certManagerVersion + "=/webhook=" + filepath.Join(cm, "webhook"),
		"quay.io/jetstack/cert-manager-cainjector:" + tp.certManagerVersion + "=/cainjector=" + filepath.Join(cm, "cainjector"),
	}
}

// buildThirdPartyImages makes the images of tp and returns their archives.
func buildThirdPartyImages(ctx context.Context, tp thirdParty, out string) ([]string, error) {
	args := []string{"run", "./hack/imagebuild", "-out", out, "-platforms", "linux/" + goarch()}
	for _, w := range tp.images() {
		args = append(args, "-wrap", w)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return strings.Fields(string(b)), nil
}

// localRepository writes a clusterctl repository under dir — `<provider-label>/<version>/<files>`,
// the layout docs/install.md tells users to make — and its clusterctl.yaml, and returns the
// config's path. Cluster API's components are rendered from its own kustomizations as its release
// renders them (the release image, pulled only if not present); cert-manager's from its chart as
// its static manifest is.
func localRepository(t *testing.T, tp thirdParty, dir string) string {
	t.Helper()
	write := func(rel string, data []byte) string {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	capiMeta, err := os.ReadFile(filepath.Join(tools.CAPIDir, "metadata.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	hfMeta, err := os.ReadFile(filepath.Join(release, "metadata.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	render := func(config, stagingImage, releaseImage string) []byte {
		t.Helper()
		overlay := filepath.Join(dir, "src", filepath.Base(config))
		base, err := filepath.Rel(overlay, filepath.Join(config, "default"))
		if err != nil {
			t.Fatal(err)
		}
		name, tag, _ := strings.Cut(releaseImage, ":")
		write(filepath.Join("src", filepath.Base(config), "kustomization.yaml"), fmt.Appendf(nil, `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- %s
images:
- name: %s
  newName: %s
  newTag: %s
patches:
- target: {kind: Deployment}
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/imagePullPolicy
      value: IfNotPresent
`, base, stagingImage, name, tag))
		return []byte(kubectl(t, nil, "kustomize", overlay))
	}
	core := write(filepath.Join("cluster-api", tp.capiVersion, "core-components.yaml"), render(tp.capiConfig,
		"gcr.io/k8s-staging-cluster-api/cluster-api-controller", "registry.k8s.io/cluster-api/cluster-api-controller:"+tp.capiVersion))
	write(filepath.Join("cluster-api", tp.capiVersion, "metadata.yaml"), capiMeta)
	kcp := write(filepath.Join("control-plane-kubeadm", tp.capiVersion, "control-plane-components.yaml"), render(tp.kcpConfig,
		"gcr.io/k8s-staging-cluster-api/kubeadm-control-plane-controller", "registry.k8s.io/cluster-api/kubeadm-control-plane-controller:"+tp.capiVersion))
	write(filepath.Join("control-plane-kubeadm", tp.capiVersion, "metadata.yaml"), capiMeta)

	var hf [2]string
	for i, p := range []struct{ label, file string }{{"infrastructure-hyperfleet", "infrastructure-components.yaml"}, {"bootstrap-hyperfleet", "bootstrap-components.yaml"}} {
		b, err := os.ReadFile(filepath.Join(release, p.file))
		if err != nil {
			t.Fatal(err)
		}
		hf[i] = write(filepath.Join(p.label, "v0.1.0", p.file), b)
		write(filepath.Join(p.label, "v0.1.0", "metadata.yaml"), hfMeta)
	}

	helm := exec.Command(filepath.Join(toolsCache, "bin", "helm"), "template", "cert-manager", tp.certManagerChart,
		"--namespace", "cert-manager", "--set", "installCRDs=true", "--set", "startupapicheck.enabled=false")
	var stderr bytes.Buffer
	helm.Stderr = &stderr
	cmYAML, err := helm.Output()
	if err != nil {
		t.Fatalf("helm template cert-manager: %v: %s", err, stderr.String())
	}
	cm := write(filepath.Join("cert-manager", tp.certManagerVersion, "cert-manager.yaml"),
		append([]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: cert-manager\n"), cmYAML...))

	return write("clusterctl.yaml", fmt.Appendf(nil, `providers:
- name: cluster-api
  type: CoreProvider
  url: file://%s
- name: kubeadm
  type: ControlPlaneProvider
  url: file://%s
- name: hyperfleet
  type: InfrastructureProvider
  url: file://%s
- name: hyperfleet
  type: BootstrapProvider
  url: file://%s
cert-manager:
  url: file://%s
  version: %s
`, core, kcp, hf[0], hf[1], cm, tp.certManagerVersion))
}

// clusterctlInit runs `clusterctl init --infrastructure hyperfleet --bootstrap hyperfleet` as
// docs/install.md gives it, against the node, with the local repository of config, and waits for
// every provider's Deployments.
func clusterctlInit(t *testing.T, config string, variables ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tools.Clusterctl(), "init", "--infrastructure", "hyperfleet", "--bootstrap", "hyperfleet",
		"--config", config, "--kubeconfig", theNode.AdminKubeconfig, "--wait-providers", "--wait-provider-timeout", "300")
	// A user's own clusterctl settings and overrides stay out of the test.
	cmd.Env = append(cmd.Environ(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "XDG_CONFIG_HOME="+t.TempDir(), "HOME="+t.TempDir())
	cmd.Env = append(cmd.Env, variables...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("clusterctl init: %v\n%s", err, out)
	}
	t.Logf("clusterctl init:\n%s", out)
}

// TestClusterctlInitInstallsEveryProvider checks what `clusterctl init` leaves besides
// HyperFleet's own pods (release_test.go): cert-manager, Cluster API's core and its kubeadm
// control plane running, clusterctl's inventory naming all four providers, Cluster API's webhook
// serving with the certificate cert-manager issued and cainjector's CA bundle (a Cluster is
// admitted through it), and HyperFleet's Cluster kinds usable beside it.
func TestClusterctlInitInstallsEveryProvider(t *testing.T) {
	installRelease(t)
	for _, ns := range []string{"cert-manager", "capi-system", "capi-kubeadm-control-plane-system"} {
		kubectl(t, nil, "-n", ns, "wait", "--for=condition=Available", "deployment", "--all", "--timeout=180s")
		kubectl(t, nil, "-n", ns, "wait", "--for=condition=Ready", "pod", "--all", "--timeout=180s")
	}
	got := kubectl(t, nil, "get", "providers.clusterctl.cluster.x-k8s.io", "-A", "-o",
		`jsonpath={range .items[*]}{.type}/{.providerName}@{.version} {end}`)
	for _, want := range []string{
		"CoreProvider/cluster-api@" + third.capiVersion, "ControlPlaneProvider/kubeadm@" + third.capiVersion,
		"InfrastructureProvider/hyperfleet@v0.1.0", "BootstrapProvider/hyperfleet@v0.1.0",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("clusterctl's inventory %q lacks %s", got, want)
		}
	}
	if ready := kubectl(t, nil, "-n", "capi-system", "get", "certificate", "capi-serving-cert", "-o",
		`jsonpath={.status.conditions[?(@.type=="Ready")].status}`); ready != "True" {
		t.Errorf("cert-manager has not issued Cluster API's serving certificate: Ready=%q", ready)
	}
	// Cluster API's defaulting and validating webhooks run on every Cluster: a server-side dry
	// run goes through both, so it fails unless the webhook serves a certificate the API server
	// trusts through the CA bundle cainjector wrote.
	kubectl(t, nil, "create", "namespace", "clusterctl-probe")
	out := kubectl(t, []byte(`apiVersion: cluster.x-k8s.io/v1beta2
kind: Cluster
metadata:
  name: runners
  namespace: clusterctl-probe
spec:
  infrastructureRef:
    apiGroup: infrastructure.cluster.x-k8s.io
    kind: HypervisorCluster
    name: pve-lab
`), "apply", "--dry-run=server", "-f", "-")
	t.Logf("a Cluster through Cluster API's webhooks: %s", out)
}
