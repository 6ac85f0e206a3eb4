package packaging

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hyperfleet-io/hyperfleet/pkg/console"
)

// consoleHelmValues enable the console in the chart.
var consoleHelmValues = []string{"--set", "console.enabled=true", "--set", "console.publicURL=https://console.example.com",
	"--set", "console.oidc.issuerURL=https://login.example.com/tenant/v2.0", "--set", "console.oidc.clientID=hyperfleet-console",
	"--set", "console.oidc.roleName=HyperFleet.Operator", "--set", "console.clientSecret=s3cret",
	"--set", "console.sessionKey=0123456789abcdef0123456789abcdef0123"}

// checkConsoleInstall checks what every console install must have: the hardened Deployment with its
// secrets as files and probes, and an Ingress with TLS that routes the OIDC callback.
func checkConsoleInstall(t *testing.T, objs []unstructured.Unstructured) {
	t.Helper()
	g := NewWithT(t)
	d := deployment(t, find(t, objs, "Deployment", "console"))
	c := container(t, d, "console")
	hardened(g, d, c)
	g.Expect(c.Command).To(Equal([]string{"/console"}))
	g.Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
	g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
	g.Expect(c.VolumeMounts).To(ContainElement(corev1.VolumeMount{Name: "secrets", MountPath: "/run/secrets/console", ReadOnly: true}))
	g.Expect(c.Env).To(BeEmpty(), "no secret travels in the environment")

	ing := &networkingv1.Ingress{}
	fromUnstructured(t, find(t, objs, "Ingress", "console"), ing)
	g.Expect(ing.Spec.TLS).To(HaveLen(1))
	var paths []string
	for _, p := range ing.Spec.Rules[0].HTTP.Paths {
		paths = append(paths, p.Path)
	}
	g.Expect(paths).To(ContainElements("/oidc/callback", "/"))

	// The shipped settings are accepted by the console itself.
	cm := &corev1.ConfigMap{}
	fromUnstructured(t, find(t, objs, "ConfigMap", "console-config"), cm)
	dir := t.TempDir()
	g.Expect(os.WriteFile(filepath.Join(dir, "client-secret"), []byte("s3cret"), 0o600)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "session-key"), []byte(strings.Repeat("k", 48)), 0o600)).To(Succeed())
	envs := map[string]string{}
	for k, v := range cm.Data {
		envs[k] = strings.ReplaceAll(v, "/run/secrets/console", dir)
	}
	s, err := console.LoadSettings(func(k string) string { return envs[k] })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.RedirectURL()).To(HavePrefix("https://"))
}

// TestConsoleKustomize: config/console renders, passes a restricted namespace's Pod Security
// admission in a server-side dry run, and carries what a console install needs.
func TestConsoleKustomize(t *testing.T) {
	g := NewWithT(t)
	manifests := kustomize(t, "config/console")
	objs := decode(t, manifests)
	g.Expect(kinds(objs)).To(Equal(map[string]int{"ServiceAccount": 1, "ClusterRole": 2, "ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1,
		"ConfigMap": 1, "Deployment": 1, "Service": 1, "Ingress": 1}))
	checkConsoleInstall(t, objs)
	const ns = "hyperfleet-console-kustomize"
	restrictedNamespace(t, ns)
	out := dryRunApply(t, []byte(strings.ReplaceAll(string(manifests), "namespace: hyperfleet-system", "namespace: "+ns)))
	noPodSecurityWarnings(t, out)
}

// TestConsoleHelmMatchesKustomize: the chart's console (enabled, one tenant namespace) grants exactly
// the RBAC of config/console/rbac and config/console/tenant, and is a complete console install.
func TestConsoleHelmMatchesKustomize(t *testing.T) {
	g := NewWithT(t)
	helm := helmBinary(t)
	const team = "team-a"
	args := append([]string{"template", "hyperfleet", chart, "--namespace", "hyperfleet-system", "--set", "tenantNamespaces={" + team + "}"}, consoleHelmValues...)
	objs := decode(t, run(t, nil, nil, helm, args...))
	checkConsoleInstall(t, objs)
	withoutConsole := grants(t, decode(t, run(t, nil, nil, helm, "template", "hyperfleet", chart, "--namespace", "hyperfleet-system",
		"--set", "tenantNamespaces={"+team+"}")))
	fromHelm := grants(t, objs)
	for k := range withoutConsole {
		delete(fromHelm, k)
	}
	fromKustomize := grants(t, decode(t, kustomize(t, "config/console/rbac")))
	for k, v := range grants(t, decode(t, kustomize(t, "config/console/tenant"))) {
		kind, rest, _ := strings.Cut(k, "/")
		_, name, _ := strings.Cut(rest, "/")
		fromKustomize[kind+"/"+team+"/"+name] = v
	}
	g.Expect(fromHelm).To(Equal(fromKustomize))

	// Without the settings it needs, the chart refuses to render.
	out, err := tryRun(nil, nil, helm, "template", "hyperfleet", chart, "--set", "console.enabled=true")
	g.Expect(err).To(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring("console.publicURL"))
}
