package packaging

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

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.ExitIfShort("an API server")
	ctrl.SetLogger(logr.Discard())
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}

// run executes a tool with stdin and extra environment, failing the test on a non-zero exit.
func run(t *testing.T, stdin []byte, extraEnv []string, name string, args ...string) []byte {
	t.Helper()
	out, err := tryRun(stdin, extraEnv, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return out
}

func tryRun(stdin []byte, extraEnv []string, name string, args ...string) ([]byte, error) {
	// Ten minutes: the release script's first cross-compile of the agent for arm64 builds Go's
	// standard library for it too, minutes on two cores busy with other packages' tests.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = env.RepoRoot
	cmd.Env = append(os.Environ(), extraEnv...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return append(stdout.Bytes(), stderr.Bytes()...), err
	}
	return stdout.Bytes(), nil
}

// kustomize renders a kustomization directory of the repository with kubectl's built-in kustomize.
func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	return run(t, nil, nil, env.Tools.Kubectl(), "kustomize", filepath.Join(env.RepoRoot, dir))
}

// dryRunApply hands manifests to the API server as a server-side apply dry run with strict field
// validation: unknown fields, schema violations and missing kinds all fail.
// It returns kubectl's output including warnings, e.g. Pod Security admission's.
func dryRunApply(t *testing.T, manifests []byte) string {
	t.Helper()
	return apply(t, manifests, "--dry-run=server")
}

func apply(t *testing.T, manifests []byte, extraArgs ...string) string {
	t.Helper()
	args := append([]string{"--kubeconfig", env.KubeconfigPath,
		"apply", "--server-side", "--force-conflicts", "--field-manager=hyperfleet-packaging-test",
		"--validate=strict", "-f", "-"}, extraArgs...)
	cmd := exec.Command(env.Tools.Kubectl(), args...)
	cmd.Stdin = bytes.NewReader(manifests)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply %s: %v\n%s", strings.Join(extraArgs, " "), err, out)
	}
	return string(out)
}

// applyNamespaces creates the Namespace objects among objs for real, so a dry run of the namespaced
// objects finds them and Pod Security admission judges the workloads against their labels.
func applyNamespaces(t *testing.T, objs []unstructured.Unstructured) {
	t.Helper()
	var nss []unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Namespace" {
			nss = append(nss, o)
		}
	}
	if len(nss) > 0 {
		apply(t, toYAML(t, nss))
	}
}

// noPodSecurityWarnings fails when the API server warned that a workload breaks its namespace's
// Pod Security level.
func noPodSecurityWarnings(t *testing.T, out string) {
	t.Helper()
	if strings.Contains(out, "PodSecurity") {
		t.Errorf("Pod Security admission warned:\n%s", out)
	}
}

// restrictedNamespace creates a namespace enforcing the restricted Pod Security level, so dry runs
// of workloads into it are judged by admission.
func restrictedNamespace(t *testing.T, name string) {
	t.Helper()
	apply(t, []byte(`apiVersion: v1
kind: Namespace
metadata:
  name: `+name+`
  labels:
    pod-security.kubernetes.io/enforce: restricted
`))
}

// ensureNamespace creates a namespace for real: a dry run of namespaced objects needs it to exist.
func ensureNamespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(context.Background(), ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// decode splits a multi-document YAML stream into objects.
func decode(t *testing.T, manifests []byte) []unstructured.Unstructured {
	t.Helper()
	var objs []unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("decoding manifests: %v", err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, unstructured.Unstructured{Object: m})
	}
	if len(objs) == 0 {
		t.Fatal("no objects rendered")
	}
	return objs
}

// find returns the single object of kind whose name ends with suffix.
func find(t *testing.T, objs []unstructured.Unstructured, kind, suffix string) unstructured.Unstructured {
	t.Helper()
	var found []unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && strings.HasSuffix(o.GetName(), suffix) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one %s named *%s, found %d", kind, suffix, len(found))
	}
	return found[0]
}

// kinds counts objects by kind.
func kinds(objs []unstructured.Unstructured) map[string]int {
	n := map[string]int{}
	for _, o := range objs {
		n[o.GetKind()]++
	}
	return n
}

// toYAML renders objects back into a stream, e.g. after a test changed them.
func toYAML(t *testing.T, objs []unstructured.Unstructured) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, o := range objs {
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes()
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
