package integration

import (
	"context"
	"os/exec"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestScaleSubresource drives a RunnerPool the way HPA, KEDA or a person does: through /scale.
func TestScaleSubresource(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, "scale")
	pool := builder.NewRunnerPool("linux", ns).WithBounds(1, 5).Build()
	g.Expect(env.Client.Create(ctx, pool)).To(Succeed())

	kubectl := func(args ...string) (string, error) {
		out, err := exec.Command(env.Tools.Kubectl(), append([]string{"--kubeconfig", env.KubeconfigPath, "-n", ns}, args...)...).CombinedOutput()
		return string(out), err
	}
	out, err := kubectl("scale", "runnerpool/linux", "--replicas=3")
	g.Expect(err).NotTo(HaveOccurred(), out)
	got := &fleetv1.RunnerPool{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(pool), got)).To(Succeed())
	g.Expect(got.Spec.Replicas).NotTo(BeNil())
	g.Expect(*got.Spec.Replicas).To(Equal(int32(3)))

	out, err = kubectl("scale", "runnerpool/linux", "--replicas=9")
	g.Expect(err).To(HaveOccurred(), "above maxReplicas")
	g.Expect(out).To(ContainSubstring("replicas must lie between minReplicas and maxReplicas"))
}
