package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

func validVMPool(ns, name string) *fleetv1.VMPool {
	return &fleetv1.VMPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleetv1.VMPoolSpec{
			Replicas: ptr.To[int32](3),
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: fleetv1.VMPoolMachineTemplate{
				ObjectMeta: clusterv1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: infrav1.MachineClaimSpec{
					MachineClaimLifecycleSpec: infrav1.MachineClaimLifecycleSpec{Lifecycle: infrav1.LifecyclePersistent, RunStrategy: infrav1.RunStrategyAlways},
					Template:                  infrav1.TemplateSource{ID: "9000"},
					HypervisorClusterName:     "pve",
				},
			},
		},
	}
}

// TestVMPoolValidation: a pool's VMs are Persistent and placed on a named HypervisorCluster, its
// template gives no claim an identity, the rolling update bounds are numbers or percentages and
// not both zero, autoscaling has a target and a sane range, and the name leaves room for the VMs'
// names; each refusal says why. Defaults are MachineDeployment's.
func TestVMPoolValidation(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "vmpool")
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int32) *intstr.IntOrString { v := intstr.FromInt32(n); return &v }
	with := func(name string, mutate func(*fleetv1.VMPool)) client.Object {
		p := validVMPool(ns, name)
		mutate(p)
		return p
	}
	rolling := func(surge, unavailable *intstr.IntOrString) func(*fleetv1.VMPool) {
		return func(p *fleetv1.VMPool) {
			p.Spec.Strategy = fleetv1.VMPoolStrategy{Type: fleetv1.RollingUpdateVMPoolStrategy,
				RollingUpdate: &fleetv1.VMPoolRollingUpdate{MaxSurge: surge, MaxUnavailable: unavailable}}
		}
	}
	cases := []struct {
		name    string
		obj     client.Object
		message string
	}{
		{name: "valid pool", obj: validVMPool(ns, "web")},
		{name: "ephemeral template", obj: with("eph", func(p *fleetv1.VMPool) {
			p.Spec.Template.Spec.Lifecycle, p.Spec.Template.Spec.RunStrategy = "", ""
		}), message: "a VMPool's VMs are long-lived: set template.spec.lifecycle: Persistent"},
		{name: "no hypervisor cluster", obj: with("nohc", func(p *fleetv1.VMPool) { p.Spec.Template.Spec.HypervisorClusterName = "" }),
			message: "template.spec.hypervisorClusterName is required"},
		{name: "claimID in the template", obj: with("claimid", func(p *fleetv1.VMPool) { p.Spec.Template.Spec.ClaimID = "abcdefgh12" }),
			message: "template.spec cannot set claimID or providerID"},
		{name: "both bounds zero", obj: with("zero", rolling(num(0), num(0))), message: "maxSurge and maxUnavailable cannot both be 0"},
		{name: "both bounds zero percent", obj: with("zeropct", rolling(pct("0%"), pct("0%"))), message: "maxSurge and maxUnavailable cannot both be 0"},
		{name: "surge zero with unavailable defaulting to zero", obj: with("zerodefault", rolling(num(0), nil)), message: "maxSurge and maxUnavailable cannot both be 0"},
		{name: "surge zero, one unavailable", obj: with("surge0", rolling(num(0), num(1)))},
		{name: "progress deadline within minReadySeconds", obj: with("deadline", func(p *fleetv1.VMPool) {
			p.Spec.MinReadySeconds, p.Spec.ProgressDeadlineSeconds = 600, ptr.To[int32](600)
		}), message: "progressDeadlineSeconds must be greater than minReadySeconds"},
		{name: "progress deadline past minReadySeconds", obj: with("deadline-ok", func(p *fleetv1.VMPool) {
			p.Spec.MinReadySeconds, p.Spec.ProgressDeadlineSeconds = 60, ptr.To[int32](120)
		})},
		{name: "percentages", obj: with("pcts", rolling(pct("25%"), pct("10%")))},
		{name: "not a percentage", obj: with("badpct", rolling(pct("a lot"), nil)), message: "maxSurge is a number of VMs (0 or more) or a percentage"},
		{name: "negative unavailable", obj: with("neg", rolling(nil, num(-1))), message: "maxUnavailable is a number of VMs (0 or more) or a percentage"},
		{name: "rollingUpdate with Recreate", obj: with("recreate", func(p *fleetv1.VMPool) {
			rolling(num(1), nil)(p)
			p.Spec.Strategy.Type = fleetv1.RecreateVMPoolStrategy
		}), message: "rollingUpdate applies only to type RollingUpdate"},
		{name: "static IPv4 address in the template", obj: with("static4", func(p *fleetv1.VMPool) {
			p.Spec.Template.Spec.NICs = []infrav1.NIC{{Name: "eth0", Bridge: "vmbr0", IPv4: &infrav1.StaticAddress{Address: "192.0.2.10/24", Gateway: "192.0.2.1"}}}
		}), message: "template.spec.nics cannot name a static ipv4 or ipv6 address: every VM of the pool would get the same one; take each VM's address from a Cluster API IPAM pool"},
		{name: "static IPv6 address on a second NIC", obj: with("static6", func(p *fleetv1.VMPool) {
			p.Spec.Template.Spec.NICs = []infrav1.NIC{{Name: "eth0", Bridge: "vmbr0"},
				{Name: "eth1", Bridge: "vmbr1", IPv6: &infrav1.StaticAddress{Address: "2001:db8::10/64"}}}
		}), message: "template.spec.nics cannot name a static ipv4 or ipv6 address"},
		{name: "addresses from IPAM pools and DHCP", obj: with("ipam", func(p *fleetv1.VMPool) {
			pool := &infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "web-v4"}
			p.Spec.Template.Spec.NICs = []infrav1.NIC{{Name: "eth0", Bridge: "vmbr0", IPv4PoolRef: pool}, {Name: "eth1", Bridge: "vmbr1"}}
		})},
		{name: "valid Recreate", obj: with("recreate-ok", func(p *fleetv1.VMPool) { p.Spec.Strategy.Type = fleetv1.RecreateVMPoolStrategy })},
		{name: "name too long for its VMs", obj: validVMPool(ns, "a-pool-whose-name-is-far-too-long-for-its-vm-names"), message: "a VMPool's name is at most 46 characters"},
		{name: "autoscaling without a target", obj: with("notarget", func(p *fleetv1.VMPool) {
			p.Spec.Autoscaling = &fleetv1.VMPoolAutoscaling{MaxReplicas: 5}
		}), message: "autoscaling needs a target"},
		{name: "autoscaling min above max", obj: with("minmax", func(p *fleetv1.VMPool) {
			p.Spec.Autoscaling = &fleetv1.VMPoolAutoscaling{MinReplicas: ptr.To[int32](6), MaxReplicas: 5, TargetCPUUtilizationPercent: ptr.To[int32](60)}
		}), message: "autoscaling.minReplicas must not be greater than maxReplicas"},
		{name: "valid autoscaling", obj: with("auto", func(p *fleetv1.VMPool) {
			p.Spec.Autoscaling = &fleetv1.VMPoolAutoscaling{MinReplicas: ptr.To[int32](2), MaxReplicas: 10, TargetCPUUtilizationPercent: ptr.To[int32](60),
				Behavior: &fleetv1.VMPoolScalingBehavior{ScaleDown: &fleetv1.VMPoolScalingRules{StabilizationWindowSeconds: ptr.To[int32](600),
					Policies: []fleetv1.VMPoolScalingPolicy{{Type: fleetv1.PodsScalingPolicy, Value: 1, PeriodSeconds: 120}}}}}
		})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(ctx, tc.obj, client.DryRunAll)
			if tc.message == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}

	t.Run("defaults", func(t *testing.T) {
		g := NewWithT(t)
		p := validVMPool(ns, "defaults")
		p.Spec.Replicas = nil
		g.Expect(env.Client.Create(ctx, p)).To(Succeed())
		g.Expect(p.Spec.Replicas).To(Equal(ptr.To[int32](1)))
		g.Expect(p.Spec.Strategy.Type).To(Equal(fleetv1.RollingUpdateVMPoolStrategy))
	})
	t.Run("template hardware may change", func(t *testing.T) {
		// A claim's disks cannot change, but a pool's template is not a claim: a new disk in it
		// rolls the pool's VMs to VMs that have it.
		g := NewWithT(t)
		p := validVMPool(ns, "disks")
		g.Expect(env.Client.Create(ctx, p)).To(Succeed())
		p.Spec.Template.Spec.Disks = []infrav1.ExtraDisk{{Name: "data", SizeGiB: 20}}
		g.Expect(env.Client.Update(ctx, p)).To(Succeed())
		p.Spec.Template.Spec.Disks[0].SizeGiB = 40
		g.Expect(env.Client.Update(ctx, p)).To(Succeed())
		p.Spec.Template.Spec.Disks = nil
		g.Expect(env.Client.Update(ctx, p)).To(Succeed())
	})
	t.Run("selector is immutable", func(t *testing.T) {
		g := NewWithT(t)
		p := validVMPool(ns, "immutable")
		g.Expect(env.Client.Create(ctx, p)).To(Succeed())
		p.Spec.Selector.MatchLabels = map[string]string{"app": "other"}
		err := env.Client.Update(ctx, p)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("selector is immutable"))
	})
}
