package realguest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
	"github.com/hyperfleet-io/hyperfleet/test/qemuguest"
)

// TestHyperVGuestUnderTheSimulator boots the runner template, converted to a .vhdx as
// docs/hyperv.md tells a user to, through HyperFleet's Hyper-V provider and the WS-Management
// simulator's QEMU backend: a differencing disk of the template, the seed ISO the provider
// uploads in the VM's SCSI DVD drive, and a generation 2 VM with Secure Boot and Microsoft's UEFI
// CA (the provider's default template), which Debian's signed shim, GRUB and kernel must pass.
// Real cloud-init runs the seed's runcmd, the guest's address reaches the provider, and a
// shutdown request powers the guest off.
func TestHyperVGuestUnderTheSimulator(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if err := qemuguest.CheckFirmware(qemuguest.UEFISecureBoot); err != nil {
		t.Skipf("a generation 2 guest cannot boot here: %v (hack/prereqs.sh installs ovmf)", err)
	}
	g := NewWithT(t)
	vhdx := templateVHDX(t)
	sim := hvsim.StartHyperVForTest(t, hvsim.HyperVConfig{Guest: &qemuguest.Config{Image: vhdx, Dir: t.TempDir()}}, "hv1")
	g.Expect(sim.GuestErr()).NotTo(HaveOccurred())
	p, err := hyperv.New(hyperv.Config{Username: hvsim.HyperVTestUser, Password: hvsim.HyperVTestPassword, Auth: "ntlm", CABundle: sim.CAPEM,
		Cluster: "realguest/hv", InstallationID: "0123456789abcdef", Timeout: 30 * time.Second,
		Hosts: []hyperv.Host{{Name: "hv1", Endpoint: sim.Servers["hv1"].URL()}}}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 3*guestBound)
	defer cancel()

	tmpl, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: hvsim.HyperVTemplate})
	g.Expect(err).NotTo(HaveOccurred())
	owner := hypervisor.Ownership{Cluster: "realguest/hv", ClaimNamespace: "runners", ClaimName: "guest-hv", ClaimID: "claim-hv"}
	ref, _, err := p.Clone(ctx, hypervisor.CloneSpec{Source: tmpl.Ref, Target: hypervisor.VMRef{Node: "hv1"}, Name: "guest-hv", Owner: owner})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = p.Configure(ctx, ref, hypervisor.ConfigSpec{
		Cores: 1, MemoryMiB: 1024, Network: &hypervisor.NetworkSpec{Name: hvsim.HyperVSwitch},
		CloudInit: &hypervisor.CloudInitData{
			UserData: "#cloud-config\nruncmd:\n- [sh, -c, 'echo \"hyperfleet-realguest: guest-hv ran its runcmd\" > /dev/ttyS0']\n",
			MetaData: "instance-id: guest-hv\nlocal-hostname: guest-hv\n",
		},
	})
	g.Expect(err).NotTo(HaveOccurred())
	vms := sim.VMs("hv1")
	g.Expect(vms).To(HaveLen(1))
	g.Expect(vms[0].SecureBoot).To(Equal(hyperv.DefaultSecureBootTemplate))

	_, err = p.Start(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	started := time.Now()
	console := sim.GuestConsoleLog(ref.ID)
	consoleSays := func(text string) func(Gomega) {
		return func(g Gomega) {
			out, err := os.ReadFile(console)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(string(out)).To(ContainSubstring(text))
		}
	}
	g.Eventually(consoleSays("secureboot: Secure boot enabled"), guestBound, time.Second).Should(Succeed(),
		"the firmware enforces Secure Boot and Debian's shim, GRUB and kernel pass it (console: %s)", console)
	t.Logf("kernel up under Secure Boot %s after the start", time.Since(started).Round(time.Second))

	g.Eventually(func(g Gomega) {
		addrs, err := p.Addresses(ctx, ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(addrs).To(ContainElement(hypervisor.Address{Type: hypervisor.AddressInternalIP, Address: qemuguest.GuestIP}))
	}, guestBound, 2*time.Second).Should(Succeed(), "the guest reports its address (console: %s)", console)
	t.Logf("address reported %s after the start", time.Since(started).Round(time.Second))

	g.Eventually(consoleSays("hyperfleet-realguest: guest-hv ran its runcmd"), guestBound, time.Second).Should(Succeed(),
		"cloud-init reads the seed from the SCSI DVD and runs its runcmd (console: %s)", console)
	t.Logf("cloud-init's runcmd done %s after the start", time.Since(started).Round(time.Second))

	_, err = p.Shutdown(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		vm, err := p.VM(ctx, ref)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(vm.State).To(Equal(hypervisor.PowerStateStopped))
	}, guestBound, time.Second).Should(Succeed(), "the guest powers off when asked to shut down (console: %s)", console)
	t.Logf("powered off %s after the start", time.Since(started).Round(time.Second))

	_, err = p.Delete(ctx, ref)
	g.Expect(err).NotTo(HaveOccurred())
	_, kept := sim.GuestDisk(ref.ID)
	g.Expect(kept).To(BeFalse(), "the guest's disk goes with its VM")
}

var (
	vhdxOnce sync.Once
	vhdxPath string
	vhdxErr  error
)

// templateVHDX is the runner template as a Hyper-V host takes it, made with the command
// docs/hyperv.md gives (qemu-img convert -O vhdx -o subformat=dynamic), once per template build
// and kept beside it in the cache.
func templateVHDX(t *testing.T) string {
	t.Helper()
	vhdxOnce.Do(func() {
		vhdxPath = strings.TrimSuffix(fleetImage, ".qcow2") + ".vhdx"
		if _, err := os.Stat(vhdxPath); err == nil {
			return
		}
		start := time.Now()
		tmp := vhdxPath + ".part"
		out, err := exec.Command("qemu-img", "convert", "-O", "vhdx", "-o", "subformat=dynamic", fleetImage, tmp).CombinedOutput()
		if err != nil {
			_ = os.Remove(tmp)
			vhdxErr = err
			t.Logf("qemu-img convert: %s", out)
			return
		}
		if vhdxErr = os.Rename(tmp, vhdxPath); vhdxErr != nil {
			return
		}
		t.Logf("converted the template to %s in %s", filepath.Base(vhdxPath), time.Since(start).Round(time.Second))
		// Conversions of earlier builds of the template are superseded.
		old, _ := filepath.Glob(filepath.Join(filepath.Dir(vhdxPath), "hyperfleet-runner-*.vhdx"))
		for _, o := range old {
			if o != vhdxPath {
				_ = os.Remove(o)
			}
		}
	})
	if vhdxErr != nil {
		t.Fatalf("converting the template to a .vhdx: %v", vhdxErr)
	}
	return vhdxPath
}
