package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestPlacementValidation: host selectors, affinity and anti-affinity belong to Persistent claims
// (and templates of them); an Ephemeral runner carrying them is refused with a message saying so.
func TestPlacementValidation(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "placement")
	rules := infrav1.PlacementSpec{
		HostSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "a"}},
		AntiAffinity: []metav1.LabelSelector{{MatchLabels: map[string]string{"app": "db"}}},
		Affinity: []metav1.LabelSelector{{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"cache"}}}}},
	}
	const refused = "placement applies only to a Persistent claim"
	cases := []struct {
		name    string
		obj     client.Object
		message string
	}{
		{name: "persistent claim with placement", obj: builder.NewMachineClaim("db", ns).WithPersistent(infrav1.RunStrategyAlways).WithPlacement(rules).Build()},
		{name: "ephemeral claim with placement", obj: builder.NewMachineClaim("runner", ns).WithPlacement(rules).Build(), message: refused},
		{name: "ephemeral claim with an empty placement", obj: builder.NewMachineClaim("empty", ns).WithPlacement(infrav1.PlacementSpec{}).Build(), message: refused},
		{name: "template of persistent claims with placement", obj: builder.NewMachineClaimTemplate("dbs", ns).WithSpec(
			builder.NewMachineClaim("x", ns).WithPersistent(infrav1.RunStrategyAlways).WithPlacement(rules).Build().Spec).Build()},
		{name: "template of runners with placement", obj: builder.NewMachineClaimTemplate("runners", ns).WithSpec(
			builder.NewMachineClaim("x", ns).WithPlacement(rules).Build().Spec).Build(), message: refused},
		{name: "too many anti-affinity terms", obj: builder.NewMachineClaim("many", ns).WithPersistent(infrav1.RunStrategyAlways).
			WithPlacement(infrav1.PlacementSpec{AntiAffinity: make([]metav1.LabelSelector, 9)}).Build(), message: "spec.placement.antiAffinity"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(ctx, tc.obj, client.DryRunAll)
			if tc.message == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}
