package integration

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
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
	nic := func(name string) infrav1.NIC { return infrav1.NIC{Name: name} }
	withV4 := func(n infrav1.NIC, address, gateway string) infrav1.NIC {
		n.IPv4 = &infrav1.StaticAddress{Address: address, Gateway: gateway}
		return n
	}
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
		{name: "valid NICs with static addresses and DNS", obj: claim("nics", func(b *builder.MachineClaimBuilder) {
			b.WithNICs(infrav1.NIC{Name: "lan", Bridge: "vmbr1", VLAN: ptr.To[int32](42), Firewall: true, MTU: ptr.To[int32](9000),
				IPv4: &infrav1.StaticAddress{Address: "192.0.2.10/24", Gateway: "192.0.2.1"},
				IPv6: &infrav1.StaticAddress{Address: "2001:db8::10/64", Gateway: "2001:db8::1"}}, nic("dhcp")).
				WithDNS([]string{"192.0.2.53", "2001:db8::53"}, "example.org")
		})},
		{name: "network and nics", obj: claim("both", func(b *builder.MachineClaimBuilder) { b.WithNetwork("vmbr0", 0).WithNICs(nic("lan")) }),
			message: "set either network (the first NIC only) or nics, not both"},
		{name: "dns without nics", obj: claim("dnsonly", func(b *builder.MachineClaimBuilder) { b.WithDNS([]string{"192.0.2.53"}) }),
			message: "dns is given with nics"},
		{name: "duplicate NIC names", obj: claim("dupnic", func(b *builder.MachineClaimBuilder) { b.WithNICs(nic("lan"), nic("lan")) }),
			message: "spec.nics[1]: Duplicate value"},
		{name: "address without prefix", obj: claim("noprefix", func(b *builder.MachineClaimBuilder) {
			b.WithNICs(withV4(nic("lan"), "192.0.2.10", ""))
		}), message: "address must be an IP address with its prefix length"},
		{name: "IPv6 address as ipv4", obj: claim("v6as4", func(b *builder.MachineClaimBuilder) {
			b.WithNICs(withV4(nic("lan"), "2001:db8::10/64", ""))
		}), message: "ipv4.address must be an IPv4 address"},
		{name: "IPv6 gateway for ipv4", obj: claim("gw6", func(b *builder.MachineClaimBuilder) {
			b.WithNICs(withV4(nic("lan"), "192.0.2.10/24", "2001:db8::1"))
		}), message: "ipv4.gateway must be an IPv4 address"},
		{name: "gateway that is no address", obj: claim("gwname", func(b *builder.MachineClaimBuilder) {
			b.WithNICs(withV4(nic("lan"), "192.0.2.10/24", "router"))
		}), message: "gateway must be an IP address"},
		{name: "nameserver that is no address", obj: claim("nsname", func(b *builder.MachineClaimBuilder) {
			b.WithNICs(nic("lan")).WithDNS([]string{"dns.example.org"})
		}), message: "nameservers must be IP addresses"},
		{name: "MTU too small", obj: claim("mtu", func(b *builder.MachineClaimBuilder) {
			n := nic("lan")
			n.MTU = ptr.To[int32](100)
			b.WithNICs(n)
		}), message: "spec.nics[0].mtu"},
		{name: "NIC with addresses from IPAM pools", obj: claim("pools", func(b *builder.MachineClaimBuilder) {
			n := nic("svc")
			n.IPv4PoolRef = &infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "v4"}
			n.IPv6PoolRef = &infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "v6"}
			b.WithNICs(n)
		})},
		{name: "static address and pool for one family", obj: claim("both4", func(b *builder.MachineClaimBuilder) {
			n := withV4(nic("svc"), "192.0.2.10/24", "")
			n.IPv4PoolRef = &infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "v4"}
			b.WithNICs(n)
		}), message: "set either ipv4 (a static address) or ipv4PoolRef"},
		{name: "pool without its API group", obj: claim("nogroup", func(b *builder.MachineClaimBuilder) {
			n := nic("svc")
			n.IPv6PoolRef = &infrav1.IPPoolReference{Kind: "InClusterIPPool", Name: "v6"}
			b.WithNICs(n)
		}), message: "spec.nics[0].ipv6PoolRef.apiGroup"},
		{name: "PCI devices by mapping", obj: claim("gpu", func(b *builder.MachineClaimBuilder) {
			b.WithPCIDevices(infrav1.PCIDevice{Mapping: "gpu", PCIe: true, PrimaryGPU: true}, infrav1.PCIDevice{Mapping: "nvme"})
		})},
		{name: "two primary GPUs", obj: claim("gpus", func(b *builder.MachineClaimBuilder) {
			b.WithPCIDevices(infrav1.PCIDevice{Mapping: "gpu", PrimaryGPU: true}, infrav1.PCIDevice{Mapping: "gpu2", PrimaryGPU: true})
		}), message: "at most one PCI device can be the primary GPU"},
		{name: "PCI mapping with a separator", obj: claim("gpusep", func(b *builder.MachineClaimBuilder) {
			b.WithPCIDevices(infrav1.PCIDevice{Mapping: "gpu,host=0000:01:00.0"})
		}), message: "spec.proxmox.pciDevices[0].mapping"},
		{name: "template with a static address", obj: builder.NewMachineClaimTemplate("static", ns).WithSpec(
			builder.NewMachineClaim("x", ns).WithNICs(withV4(nic("lan"), "192.0.2.10/24", "192.0.2.1")).Build().Spec).Build(),
			message: "template.spec.nics cannot name a static ipv4 or ipv6 address: every MachineClaim made from the template (each runner of a RunnerPool"},
		{name: "template with addresses from an IPAM pool", obj: builder.NewMachineClaimTemplate("ipam", ns).WithSpec(
			builder.NewMachineClaim("x", ns).WithNICs(infrav1.NIC{Name: "lan", Bridge: "vmbr1",
				IPv4PoolRef: &infrav1.IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "runners"}}, nic("dhcp")).Build().Spec).Build()},
		{name: "interface name too long for Linux", obj: claim("longname", func(b *builder.MachineClaimBuilder) { b.WithNICs(nic("a-very-long-interface")) }),
			message: "spec.nics[0].name"},
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

	t.Run("disks and nics cannot change", func(t *testing.T) {
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
		withNICs := builder.NewMachineClaim("fixednics", ns).WithNICs(nic("lan")).Build()
		g.Expect(env.Client.Create(ctx, withNICs)).To(Succeed())
		withNICs.Spec.NICs[0].Firewall = true
		err := env.Client.Update(ctx, withNICs, client.DryRunAll)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("nics cannot change once the claim exists"))

		plain := builder.NewMachineClaim("plain", ns).Build()
		g.Expect(env.Client.Create(ctx, plain)).To(Succeed())
		plain.Spec.Disks = []infrav1.ExtraDisk{disk("late", 1)}
		err = env.Client.Update(ctx, plain, client.DryRunAll)
		g.Expect(err).To(HaveOccurred(), "a disk cannot be added to an existing claim either")
		g.Expect(err.Error()).To(ContainSubstring("disks cannot change once the claim exists"))
	})
}
