package builder

import infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"

// WithDisks adds extra disks.
func (b *MachineClaimBuilder) WithDisks(disks ...infrav1.ExtraDisk) *MachineClaimBuilder {
	b.obj.Spec.Disks = append(b.obj.Spec.Disks, disks...)
	return b
}
