package packaging

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// releaseDir renders the release assets once per test binary with the same script `make
// release-manifests` runs.
func releaseDir(t *testing.T) string {
	t.Helper()
	if releaseOut == "" {
		dir, err := os.MkdirTemp(env.TempDir(), "release-")
		if err != nil {
			t.Fatal(err)
		}
		run(t, nil, []string{"RELEASE_TAG=v0.1.0"}, filepath.Join(env.RepoRoot, "hack", "release-manifests.sh"), dir)
		releaseOut = dir
	}
	return releaseOut
}

var releaseOut string

var variableRef = regexp.MustCompile(`\$\{([A-Z0-9_]+)(:=[^}]*)?\}`)

func TestReleaseManifests(t *testing.T) {
	dir := releaseDir(t)
	allCRDs, bootstrapCRDs := crdNames(t)
	infrastructureCRDs := slices.DeleteFunc(slices.Clone(allCRDs), func(n string) bool { return slices.Contains(bootstrapCRDs, n) })
	for _, tc := range []struct {
		file, provider string
		crds           []string
		deployment     string
	}{
		// The manager reconciles every kind except the bootstrap ones, whose CRDs come with the
		// bootstrap provider.
		{file: "infrastructure-components.yaml", provider: "infrastructure-hyperfleet", crds: infrastructureCRDs, deployment: "hyperfleet-controller-manager"},
		{file: "bootstrap-components.yaml", provider: "bootstrap-hyperfleet", crds: bootstrapCRDs, deployment: "hyperfleet-bootstrap-service"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			g := NewWithT(t)
			raw, err := os.ReadFile(filepath.Join(dir, tc.file))
			g.Expect(err).NotTo(HaveOccurred())

			// Every variable has a default: clusterctl init works without any being set.
			for _, m := range variableRef.FindAllStringSubmatch(string(raw), -1) {
				g.Expect(m[2]).NotTo(BeEmpty(), "variable %s has no default", m[1])
			}

			objs := decode(t, raw)
			var crds []string
			for _, o := range objs {
				g.Expect(o.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/provider", tc.provider), "%s %s", o.GetKind(), o.GetName())
				if o.GetKind() == "CustomResourceDefinition" {
					crds = append(crds, o.GetName())
					if !strings.HasSuffix(o.GetName(), ".hyperfleet.io") { // RunnerPool is no Cluster API contract kind.
						g.Expect(o.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta2", "v1alpha1"), o.GetName())
					}
				}
				if ns := o.GetNamespace(); ns != "" {
					g.Expect(ns).To(Equal(namespace))
				}
			}
			g.Expect(crds).To(ConsistOf(tc.crds))
			g.Expect(kinds(objs)).To(HaveKeyWithValue("Namespace", 1))
			find(t, objs, "Deployment", tc.deployment)
		})
	}

	t.Run("manager", func(t *testing.T) {
		g := NewWithT(t)
		objs := decode(t, mustRead(t, filepath.Join(dir, "infrastructure-components.yaml")))
		d := deployment(t, find(t, objs, "Deployment", "controller-manager"))
		c := container(t, d, "manager")
		g.Expect(c.Image).To(Equal("ghcr.io/hyperfleet-io/hyperfleet:v0.1.0"))
		cm := find(t, objs, "ConfigMap", "hyperfleet-config")
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		g.Expect(data).To(HaveKeyWithValue("LOG_LEVEL", "${HYPERFLEET_LOG_LEVEL:=INFO}"))
		g.Expect(data).To(HaveKeyWithValue("SWEEP_INTERVAL", "${HYPERFLEET_SWEEP_INTERVAL:=30s}"))
		// RunnerPools move with their Machines on `clusterctl move`.
		runnerPools := find(t, objs, "CustomResourceDefinition", "runnerpools.hyperfleet.io")
		g.Expect(runnerPools.GetLabels()).To(HaveKey("clusterctl.cluster.x-k8s.io/move-hierarchy"))
		// VMPools move with their MachineClaims.
		vmPools := find(t, objs, "CustomResourceDefinition", "vmpools.hyperfleet.io")
		g.Expect(vmPools.GetLabels()).To(HaveKey("clusterctl.cluster.x-k8s.io/move-hierarchy"))
		b := deployment(t, find(t, decode(t, mustRead(t, filepath.Join(dir, "bootstrap-components.yaml"))), "Deployment", "bootstrap-service"))
		sameIdentity(t, d, b)
		bc := container(t, b, "bootstrap-service")
		g.Expect(bc.Image).To(Equal("ghcr.io/hyperfleet-io/hyperfleet-bootstrap-service:v0.1.0"))
		g.Expect(bc.Args).To(ContainElement("--trust-domain=$(TRUST_DOMAIN)"))
		g.Expect(data).To(HaveKeyWithValue("TRUST_DOMAIN", "${HYPERFLEET_TRUST_DOMAIN:=hyperfleet.local}"))
	})

	for _, f := range []string{"metadata.yaml", "cluster-template.yaml", "cluster-template-org.yaml", "cluster-template-tpm.yaml", "cluster-template-spire.yaml", "cluster-template-vsphere.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("release asset missing: %v", err)
		}
	}
}

// TestReleaseManifestsSubstituted applies the components as clusterctl would: variables substituted
// (defaults and overrides) by clusterctl itself.
func TestReleaseManifestsSubstituted(t *testing.T) {
	g := NewWithT(t)
	dir := releaseDir(t)
	for _, file := range []string{"infrastructure-components.yaml", "bootstrap-components.yaml"} {
		out := run(t, nil, append(clusterctlEnv(t), "HYPERFLEET_LOG_LEVEL=DEBUG", "HYPERFLEET_CONCURRENCY=20"),
			env.Tools.Clusterctl(), "generate", "yaml", "--from", filepath.Join(dir, file))
		g.Expect(variableRef.Find(out)).To(BeNil(), "unsubstituted variable in %s", file)
		objs := decode(t, out)
		if file == "bootstrap-components.yaml" {
			// Kubernetes, not clusterctl, expands $(POD_NAMESPACE).
			bc := container(t, deployment(t, find(t, objs, "Deployment", "bootstrap-service")), "bootstrap-service")
			g.Expect(bc.Args).To(ContainElements("--ca-secret=$(POD_NAMESPACE)/hyperfleet-bootstrap-ca", "--trust-domain=$(TRUST_DOMAIN)"))
		}
		if file == "infrastructure-components.yaml" {
			data, _, _ := unstructured.NestedStringMap(find(t, objs, "ConfigMap", "hyperfleet-config").Object, "data")
			g.Expect(data).To(HaveKeyWithValue("LOG_LEVEL", "DEBUG"))
			g.Expect(data).To(HaveKeyWithValue("WATCH_NAMESPACE", ""))
			manager := container(t, deployment(t, find(t, objs, "Deployment", "controller-manager")), "manager")
			g.Expect(manager.Args).To(ContainElements("--concurrency=20", "--metrics-secure=true"))
		}
		applyNamespaces(t, objs)
		noPodSecurityWarnings(t, dryRunApply(t, out))
	}
}

// TestReleaseOverlayWithoutScript renders config/release/infrastructure with plain kustomize, as
// Cluster API's Tilt setup and create-local-repository.py do (tilt-provider.yaml,
// clusterctl-settings.json), and checks the result still substitutes into valid objects.
func TestReleaseOverlayWithoutScript(t *testing.T) {
	g := NewWithT(t)
	raw := kustomize(t, "config/release/infrastructure")
	file := filepath.Join(t.TempDir(), "infrastructure-components.yaml")
	g.Expect(os.WriteFile(file, raw, 0o644)).To(Succeed())
	out := run(t, nil, append(clusterctlEnv(t), "HYPERFLEET_CONCURRENCY=5", "HYPERFLEET_SWEEP_INTERVAL=45s"),
		env.Tools.Clusterctl(), "generate", "yaml", "--from", file)
	objs := decode(t, out)
	data, ok, err := unstructured.NestedStringMap(find(t, objs, "ConfigMap", "hyperfleet-config").Object, "data")
	g.Expect(err).NotTo(HaveOccurred(), "ConfigMap values must stay strings after substitution")
	g.Expect(ok).To(BeTrue())
	g.Expect(data).To(HaveKeyWithValue("SWEEP_INTERVAL", "45s"))
	g.Expect(container(t, deployment(t, find(t, objs, "Deployment", "controller-manager")), "manager").Args).
		To(ContainElement("--concurrency=5"))
	applyNamespaces(t, objs)
	dryRunApply(t, out)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
