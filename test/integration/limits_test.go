package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestHypervisorClusterLimits: a HypervisorCluster without limits gets the safe defaults (two
// clones per storage, four per host, four deletes per host) from the API server, and limits out
// of bounds are refused with a message naming the field and its bounds.
func TestHypervisorClusterLimits(t *testing.T) {
	ns := newNamespace(t, "limits")
	g := NewWithT(t)
	hc := builder.NewHypervisorCluster("defaults", ns).Build()
	g.Expect(env.Client.Create(context.Background(), hc)).To(Succeed())
	got := &infrav1.HypervisorCluster{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(hc), got)).To(Succeed())
	g.Expect(got.Spec.Limits).To(Equal(infrav1.HypervisorClusterLimits{ClonesPerHost: 4, TasksPerStorage: 2, DeletesPerHost: 4}))

	for _, tc := range []struct {
		name    string
		limits  infrav1.HypervisorClusterLimits
		message string
	}{
		{"one task per storage", infrav1.HypervisorClusterLimits{TasksPerStorage: 1}, ""},
		{"too many tasks per storage", infrav1.HypervisorClusterLimits{TasksPerStorage: 33}, "tasksPerStorage must be between 1 and 32"},
		{"negative clones per host", infrav1.HypervisorClusterLimits{ClonesPerHost: -1}, "clonesPerHost must be between 1 and 64"},
		{"too many deletes per host", infrav1.HypervisorClusterLimits{DeletesPerHost: 65}, "deletesPerHost must be between 1 and 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hc := builder.NewHypervisorCluster("limits", ns).Build()
			hc.Spec.Limits = tc.limits
			err := env.Client.Create(context.Background(), hc, client.DryRunAll)
			if tc.message == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}
