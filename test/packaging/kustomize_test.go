package packaging

import (
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

const namespace = "hyperfleet-system"

func TestKustomizeDefault(t *testing.T) {
	g := NewWithT(t)
	manifests := kustomize(t, "config/default")
	objs := decode(t, manifests)

	allCRDs, _ := crdNames(t)
	g.Expect(namesOfKind(objs, "CustomResourceDefinition")).To(ConsistOf(allCRDs), "config/crd/kustomization.yaml must list every CRD in config/crd/bases")
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			g.Expect(o.GetName()).To(Equal(namespace))
		case "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding":
		default:
			g.Expect(o.GetNamespace()).To(Equal(namespace), "%s %s", o.GetKind(), o.GetName())
			g.Expect(o.GetName()).To(HavePrefix("hyperfleet-"), "%s %s", o.GetKind(), o.GetName())
		}
	}

	manager := deployment(t, find(t, objs, "Deployment", "controller-manager"))
	g.Expect(manager.Name).To(Equal("hyperfleet-controller-manager"))
	c := container(t, manager, "manager")
	g.Expect(c.Image).To(Equal("controller:latest"))
	g.Expect(c.Args).To(ContainElement("--leader-elect"))
	g.Expect(c.EnvFrom).To(ContainElement(HaveField("ConfigMapRef.Name", "hyperfleet-config")))
	g.Expect(c.LivenessProbe.HTTPGet.Path).To(Equal("/healthz"))
	g.Expect(c.ReadinessProbe.HTTPGet.Path).To(Equal("/readyz"))
	g.Expect(ports(c)).To(Equal(map[string]int32{"metrics": 8080, "healthz": 8081, "webhook": 9090}))
	g.Expect(c.Resources.Requests).NotTo(BeEmpty())
	g.Expect(c.Resources.Limits).NotTo(BeEmpty())
	hardened(g, manager, c)

	bootstrap := deployment(t, find(t, objs, "Deployment", "bootstrap-service"))
	g.Expect(*bootstrap.Spec.Replicas).To(Equal(int32(2)))
	bc := container(t, bootstrap, "bootstrap-service")
	g.Expect(ports(bc)).To(Equal(map[string]int32{"https": 8443, "healthz": 8081}))
	g.Expect(bc.Args).To(ContainElement("--ca-secret=$(POD_NAMESPACE)/hyperfleet-bootstrap-ca"))
	g.Expect(bc.EnvFrom).To(ContainElement(HaveField("ConfigMapRef.Name", "hyperfleet-config")))
	hardened(g, bootstrap, bc)

	sameIdentity(t, manager, bootstrap)

	cm := find(t, objs, "ConfigMap", "hyperfleet-config")
	data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
	g.Expect(data).To(HaveKeyWithValue("LOG_LEVEL", "INFO"))
	g.Expect(data).To(HaveKeyWithValue("SWEEP_INTERVAL", "30s"))

	for _, svc := range []string{"hyperfleet-webhook-receiver", "hyperfleet-controller-manager-metrics-service", "hyperfleet-bootstrap-service"} {
		find(t, objs, "Service", svc)
	}
	metricsAuth := find(t, objs, "ClusterRole", "metrics-auth-role")
	g.Expect(toYAML(t, []unstructured.Unstructured{metricsAuth})).To(And(
		ContainSubstring("tokenreviews"), ContainSubstring("subjectaccessreviews")))
	find(t, objs, "Role", "leader-election-role")
	find(t, objs, "ClusterRoleBinding", "hyperfleet-manager-rolebinding")
	find(t, objs, "ServiceAccount", "hyperfleet-workload-reader")
	g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "WORKLOAD_READER_SERVICE_ACCOUNT", Value: "$(POD_NAMESPACE)/hyperfleet-workload-reader"}))

	applyNamespaces(t, objs)
	out := dryRunApply(t, manifests)
	noPodSecurityWarnings(t, out)
	g.Expect(out).To(ContainSubstring("deployment.apps/hyperfleet-controller-manager serverside-applied (server dry run)"))
}

// The monitoring add-on needs the Prometheus Operator's ServiceMonitor kind; a minimal CRD stands in.
func TestKustomizeMonitoring(t *testing.T) {
	g := NewWithT(t)
	apply(t, readTestdata(t, "servicemonitor-crd.yaml"))
	run(t, nil, nil, env.Tools.Kubectl(), "--kubeconfig", env.KubeconfigPath, "wait", "--for=condition=Established",
		"--timeout=60s", "crd/servicemonitors.monitoring.coreos.com")
	manifests := kustomize(t, "config/monitoring")
	objs := decode(t, manifests)
	g.Expect(kinds(objs)).To(Equal(map[string]int{"ServiceMonitor": 1, "ConfigMap": 1}))
	monitor := find(t, objs, "ServiceMonitor", "hyperfleet-controller-manager-metrics-monitor")
	g.Expect(monitor.GetNamespace()).To(Equal(namespace))
	dashboard := find(t, objs, "ConfigMap", "hyperfleet-grafana-dashboard")
	g.Expect(dashboard.GetLabels()).To(HaveKeyWithValue("grafana_dashboard", "1"))

	// The monitor must select the metrics Service of config/default by its labels and port name.
	svc := find(t, decode(t, kustomize(t, "config/default")), "Service", "metrics-service")
	sel, _, _ := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
	for k, v := range sel {
		g.Expect(svc.GetLabels()).To(HaveKeyWithValue(k, v))
	}
	g.Expect(toYAML(t, []unstructured.Unstructured{svc})).To(ContainSubstring("name: https"))

	ensureNamespace(t, namespace)
	dryRunApply(t, manifests)
}

func deployment(t *testing.T, o unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, d); err != nil {
		t.Fatal(err)
	}
	return d
}

func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	i := slices.IndexFunc(d.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == name })
	if i < 0 {
		t.Fatalf("deployment %s has no container %q", d.Name, name)
	}
	return d.Spec.Template.Spec.Containers[i]
}

func ports(c corev1.Container) map[string]int32 {
	p := map[string]int32{}
	for _, port := range c.Ports {
		p[port.Name] = port.ContainerPort
	}
	return p
}

// sameIdentity checks that the manager and the bootstrap service share one identity CA Secret and
// trust domain: tokens one issues the other must accept.
func sameIdentity(t *testing.T, manager, bootstrap *appsv1.Deployment) {
	t.Helper()
	arg := func(c corev1.Container, prefix string) string {
		for _, a := range c.Args {
			if strings.HasPrefix(a, prefix) {
				return strings.TrimPrefix(a, prefix)
			}
		}
		t.Fatalf("container %s has no %s argument", c.Name, prefix)
		return ""
	}
	m, b := container(t, manager, "manager"), container(t, bootstrap, "bootstrap-service")
	g := NewWithT(t)
	g.Expect(arg(m, "--bootstrap-ca-secret=")).To(Equal(arg(b, "--ca-secret=")))
	if td := arg(b, "--trust-domain="); td != "$(TRUST_DOMAIN)" {
		// Rendered literally (Helm): it must match the manager's TRUST_DOMAIN in the ConfigMap.
		g.Expect(td).To(Equal("hyperfleet.local"))
	}
	// $(VAR) references only expand for variables the container defines.
	for _, c := range []corev1.Container{m, b} {
		for _, a := range c.Args {
			if strings.Contains(a, "$(POD_NAMESPACE)") {
				g.Expect(c.Env).To(ContainElement(HaveField("Name", "POD_NAMESPACE")), c.Name)
			}
		}
	}
}

// hardened checks the security posture every HyperFleet workload shares.
func hardened(g Gomega, d *appsv1.Deployment, c corev1.Container) {
	pod := d.Spec.Template.Spec.SecurityContext
	g.Expect(pod).NotTo(BeNil())
	g.Expect(*pod.RunAsNonRoot).To(BeTrue())
	g.Expect(pod.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	sc := c.SecurityContext
	g.Expect(sc).NotTo(BeNil())
	g.Expect(*sc.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(*sc.AllowPrivilegeEscalation).To(BeFalse())
	g.Expect(sc.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
	g.Expect(strings.HasPrefix(d.Spec.Template.Spec.ServiceAccountName, "hyperfleet-")).To(BeTrue())
}
