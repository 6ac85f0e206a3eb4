package integration

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestHardwareValidation: the API server refuses malformed hardware with a message saying what
// is wrong, and refuses changing it once the claim exists.
func TestHardwareValidation(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "hardware")
	disk := func(name string, size int32) infrav1.ExtraDisk { return infrav1.ExtraDisk{Name: name, SizeGiB: size} }
	claim := func(name string, mutate func(*builder.MachineClaimBuilder)) client.Object {
		b := builder.NewMachineClaim(name, ns)
		mutate(b)
		return b.Build()
	}
	many := make([]infrav1.ExtraDisk, infrav1.MaxExtraDisks+1)
	for i := range many {
		many[i] = disk("d"+strings.Repeat("x", i), 1)
	}
	cases := []struct {
		name    string
		obj     client.Object
		message string
	}{
		{name: "valid disks", obj: claim("ok", func(b *builder.MachineClaimBuilder) {
			b.WithDisks(disk("data", 100), infrav1.ExtraDisk{Name: "wal", SizeGiB: 2, Bus: infrav1.DiskBusVirtIO, Storage: "nvme-lvm"})
		})},
		{name: "duplicate disk names", obj: claim("dup", func(b *builder.MachineClaimBuilder) { b.WithDisks(disk("data", 1), disk("data", 2)) }),
			message: `spec.disks[1]: Duplicate value`},
		{name: "too many disks", obj: claim("many", func(b *builder.MachineClaimBuilder) { b.WithDisks(many...) }),
			message: "spec.disks: Too many"},
		{name: "empty disk", obj: claim("zero", func(b *builder.MachineClaimBuilder) { b.WithDisks(disk("data", 0)) }),
			message: "spec.disks[0].sizeGiB"},
		{name: "huge disk", obj: claim("huge", func(b *builder.MachineClaimBuilder) { b.WithDisks(disk("data", 65537)) }),
			message: "spec.disks[0].sizeGiB"},
		{name: "disk name with a separator", obj: claim("sep", func(b *builder.MachineClaimBuilder) { b.WithDisks(disk("a,serial=b", 1)) }),
			message: "spec.disks[0].name"},
		{name: "unknown bus", obj: claim("ide", func(b *builder.MachineClaimBuilder) {
			b.WithDisks(infrav1.ExtraDisk{Name: "data", SizeGiB: 1, Bus: "ide"})
		}), message: "spec.disks[0].bus"},
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

	t.Run("disks cannot change", func(t *testing.T) {
		g := NewWithT(t)
		c := builder.NewMachineClaim("fixed", ns).WithDisks(disk("data", 10)).Build()
		g.Expect(env.Client.Create(ctx, c)).To(Succeed())
		for _, change := range []func(*infrav1.MachineClaim){
			func(c *infrav1.MachineClaim) { c.Spec.Disks[0].SizeGiB = 20 },
			func(c *infrav1.MachineClaim) { c.Spec.Disks = append(c.Spec.Disks, disk("more", 1)) },
			func(c *infrav1.MachineClaim) { c.Spec.Disks = nil },
		} {
			edited := c.DeepCopy()
			change(edited)
			err := env.Client.Update(ctx, edited, client.DryRunAll)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring("disks cannot change once the claim exists"))
		}
		plain := builder.NewMachineClaim("plain", ns).Build()
		g.Expect(env.Client.Create(ctx, plain)).To(Succeed())
		plain.Spec.Disks = []infrav1.ExtraDisk{disk("late", 1)}
		err := env.Client.Update(ctx, plain, client.DryRunAll)
		g.Expect(err).To(HaveOccurred(), "a disk cannot be added to an existing claim either")
		g.Expect(err.Error()).To(ContainSubstring("disks cannot change once the claim exists"))
	})
}
