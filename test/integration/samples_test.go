package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// TestSamplesAcceptedByKubectl applies every sample with kubectl, as a user would, in server-side dry-run.
func TestSamplesAcceptedByKubectl(t *testing.T) {
	g := NewWithT(t)
	cmd := exec.Command(env.Tools.Kubectl(), "--kubeconfig", env.KubeconfigPath, "apply", "--dry-run=server",
		"-n", "default", "-f", filepath.Join(env.RepoRoot, "config", "samples"))
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	t.Logf("kubectl apply --dry-run=server:\n%s", out)
	files, err := filepath.Glob(filepath.Join(env.RepoRoot, "config", "samples", "*.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Count(string(out), "(server dry run)")).To(Equal(len(files)), "one object per sample file")
}

// TestSamplesCreateAndRoundTrip creates each sample for real and reads it back, so defaults and
// server-side pruning cannot silently drop a field a sample sets.
func TestSamplesCreateAndRoundTrip(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "samples-"}}
	NewWithT(t).Expect(env.Client.Create(ctx, ns)).To(Succeed())
	files, err := filepath.Glob(filepath.Join(env.RepoRoot, "config", "samples", "*.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			g := NewWithT(t)
			data, err := os.ReadFile(f)
			g.Expect(err).NotTo(HaveOccurred())
			obj := &unstructured.Unstructured{}
			g.Expect(yaml.Unmarshal(data, &obj.Object)).To(Succeed())
			obj.SetNamespace(ns.Name)
			want := obj.DeepCopy()
			g.Expect(env.Client.Create(ctx, obj)).To(Succeed())
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(obj.GroupVersionKind())
			g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(obj), got)).To(Succeed())
			if spec, ok := want.Object["spec"].(map[string]any); ok {
				assertSubset(g, "spec", spec, got.Object["spec"])
			}
		})
	}
}

// assertSubset checks that every field of want is present with the same value in got.
func assertSubset(g Gomega, path string, want any, got any) {
	switch w := want.(type) {
	case map[string]any:
		gm, ok := got.(map[string]any)
		g.Expect(ok).To(BeTrue(), "%s: expected an object, got %v", path, got)
		for k, v := range w {
			assertSubset(g, path+"."+k, v, gm[k])
		}
	case []any:
		gl, ok := got.([]any)
		g.Expect(ok).To(BeTrue(), "%s: expected a list, got %v", path, got)
		g.Expect(gl).To(HaveLen(len(w)), path)
		for i := range w {
			assertSubset(g, path, w[i], gl[i])
		}
	default:
		g.Expect(got).To(BeEquivalentTo(want), path)
	}
}
