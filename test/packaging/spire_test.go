package packaging

import (
	"bytes"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestSPIREEndpointInstalls checks both ways of switching on the bootstrap service's SPIRE endpoint:
// the flags, the port on the Pod and the Service, and the Workload API volume, which must pass the
// restricted Pod Security level of the namespace.
func TestSPIREEndpointInstalls(t *testing.T) {
	const ns = "hyperfleet-spire"
	restrictedNamespace(t, ns)
	for name, manifests := range map[string][]byte{
		// Moved into the restricted namespace, so admission judges the pod template.
		"kustomize": bytes.ReplaceAll(kustomize(t, "config/spire"), []byte("namespace: "+namespace), []byte("namespace: "+ns)),
		"helm": run(t, nil, nil, helmBinary(t), "template", "hyperfleet", chart, "--namespace", ns,
			"--set", "bootstrapService.spire.enabled=true,identity.spire.bootstrapServiceURL=https://bootstrap.example.com:8444"),
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			objs := decode(t, manifests)
			d := deployment(t, find(t, objs, "Deployment", "hyperfleet-bootstrap-service"))
			c := container(t, d, "bootstrap-service")
			g.Expect(c.Args).To(ContainElements("--spire-listen=:8444",
				"--spire-workload-api-address=unix:///spiffe-workload-api/spire-agent.sock"))
			g.Expect(c.Ports).To(ContainElement(And(HaveField("Name", "spire"), HaveField("ContainerPort", int32(8444)))))
			g.Expect(c.VolumeMounts).To(ContainElement(And(HaveField("Name", "spiffe-workload-api"),
				HaveField("MountPath", "/spiffe-workload-api"), HaveField("ReadOnly", true))))
			g.Expect(d.Spec.Template.Spec.Volumes).To(ContainElement(And(HaveField("Name", "spiffe-workload-api"),
				HaveField("VolumeSource.CSI", HaveField("Driver", "csi.spiffe.io")))))
			svc := find(t, objs, "Service", "hyperfleet-bootstrap-service")
			g.Expect(toYAML(t, []unstructured.Unstructured{svc})).To(ContainSubstring("name: spire"))
			noPodSecurityWarnings(t, dryRunApply(t, manifests))
		})
	}
}
