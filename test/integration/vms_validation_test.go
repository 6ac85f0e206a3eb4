package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestLifecycleValidation: run strategies and hooks belong to Persistent claims, a Persistent
// claim needs a run strategy, and the lifecycle cannot change; each refusal says why.
func TestLifecycleValidation(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "lifecycle")
	cases := []struct {
		name    string
		obj     client.Object
		message string
	}{
		{name: "valid persistent claim", obj: builder.NewMachineClaim("db", ns).WithPersistent(infrav1.RunStrategyAlways).Build()},
		{name: "valid persistent claim with hooks", obj: builder.NewMachineClaim("hooks", ns).WithPersistent(infrav1.RunStrategyManual).
			WithHooks([]string{"systemctl", "start", "app"}, []string{"systemctl", "stop", "app"}).WithTerminationGracePeriod(60).Build()},
		{name: "runStrategy on an ephemeral claim", obj: func() client.Object {
			c := builder.NewMachineClaim("eph", ns).Build()
			c.Spec.RunStrategy = infrav1.RunStrategyAlways
			return c
		}(), message: "runStrategy applies only to a Persistent claim"},
		{name: "persistent claim without runStrategy", obj: func() client.Object {
			c := builder.NewMachineClaim("nors", ns).Build()
			c.Spec.Lifecycle = infrav1.LifecyclePersistent
			return c
		}(), message: "a Persistent claim needs a runStrategy"},
		{name: "hooks on an ephemeral claim", obj: func() client.Object {
			c := builder.NewMachineClaim("ephhooks", ns).WithHooks(nil, []string{"true"}).Build()
			return c
		}(), message: "hooks apply only to a Persistent claim"},
		{name: "unknown run strategy", obj: builder.NewMachineClaim("bad", ns).WithPersistent("Sometimes").Build(),
			message: "spec.runStrategy"},
		{name: "schedule with the time zone in the expression", obj: &fleetv1.MachineSnapshotSchedule{
			ObjectMeta: metav1.ObjectMeta{Name: "tz", Namespace: ns},
			Spec: fleetv1.MachineSnapshotScheduleSpec{Source: fleetv1.MachineSnapshotSource{MachineClaimName: "db"},
				Schedule: "CRON_TZ=Europe/Berlin 0 2 * * *"}}, message: "set the time zone in timeZone"},
		{name: "schedule keeping zero snapshots", obj: &fleetv1.MachineSnapshotSchedule{
			ObjectMeta: metav1.ObjectMeta{Name: "zero", Namespace: ns},
			Spec: fleetv1.MachineSnapshotScheduleSpec{Source: fleetv1.MachineSnapshotSource{MachineClaimName: "db"},
				Schedule: "0 2 * * *", Retention: &fleetv1.SnapshotRetention{Count: ptr.To[int32](0)}}}, message: "spec.retention.count"},
		{name: "valid nightly schedule", obj: &fleetv1.MachineSnapshotSchedule{
			ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: ns},
			Spec: fleetv1.MachineSnapshotScheduleSpec{Source: fleetv1.MachineSnapshotSource{MachineClaimName: "db"},
				Schedule: "0 2 * * *", TimeZone: "Europe/Berlin", Retention: &fleetv1.SnapshotRetention{Count: ptr.To[int32](7)}}}},
		{name: "valid snapshot", obj: &fleetv1.MachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "snap", Namespace: ns},
			Spec: fleetv1.MachineSnapshotSpec{Source: fleetv1.MachineSnapshotSource{MachineClaimName: "db"}}}},
		{name: "hook without a command", obj: builder.NewMachineClaim("nocmd", ns).WithPersistent(infrav1.RunStrategyAlways).
			WithHooks([]string{}, nil).Build(), message: "spec.hooks.preStart.command"},
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

	t.Run("lifecycle cannot change", func(t *testing.T) {
		g := NewWithT(t)
		claim := builder.NewMachineClaim("fixed", ns).Build()
		g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
		g.Expect(claim.Spec.Lifecycle).To(Equal(infrav1.LifecycleEphemeral), "Ephemeral is the default")
		claim.Spec.Lifecycle, claim.Spec.RunStrategy = infrav1.LifecyclePersistent, infrav1.RunStrategyAlways
		err := env.Client.Update(ctx, claim)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("lifecycle cannot change"))
	})

	t.Run("a snapshot cannot change", func(t *testing.T) {
		g := NewWithT(t)
		snap := &fleetv1.MachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "fixed", Namespace: ns},
			Spec: fleetv1.MachineSnapshotSpec{Source: fleetv1.MachineSnapshotSource{MachineClaimName: "db"}}}
		g.Expect(env.Client.Create(ctx, snap)).To(Succeed())
		snap.Spec.Source.MachineClaimName = "other"
		err := env.Client.Update(ctx, snap)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("a snapshot's source and withMemory cannot change"))
	})
}
