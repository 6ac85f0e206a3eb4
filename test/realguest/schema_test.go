package realguest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// TestRenderedUserDataIsValidCloudConfig runs the template's own cloud-init (`cloud-init schema`,
// offline, inside the image's root file system) over the user-data HyperFleet renders: builtin and
// SPIRE identity, TPM attestation, and a template's cloud-config merged under the bootstrap data.
func TestRenderedUserDataIsValidCloudConfig(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	if os.Geteuid() != 0 {
		t.Skip("reading the image's root file system needs root (a loop device and a mount)")
	}
	g := NewWithT(t)
	root := mountImage(t, fleetImage)
	base := bootstrap.Input{
		Namespace: "team-a", Machine: "linux-x64-abcde", ServiceURL: "https://10.0.2.100:8443",
		TrustDomain: "hyperfleet.local", TrustBundlePEM: []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"),
		Credential: identity.Credential{JoinToken: "hfjt_team-a_linux-x64-abcde_" + strings.Repeat("0", 64), ExpiresAt: time.Now().Add(15 * time.Minute)},
		Platform:   "github", Labels: []string{"linux", "x64"},
		Spec: bootstrapv1.BootstrapConfigSpec{Runner: bootstrapv1.RunnerSpec{OS: "linux", Arch: "x64",
			DownloadURL: "https://example.invalid/actions-runner.tar.gz", SHA256: strings.Repeat("a", 64)}},
	}
	spire := base
	spire.SPIRE = &bootstrap.SPIREAgent{ServerAddress: "10.0.2.100:8081"}
	tpm := base
	tpm.Spec.Attestation.Method = bootstrapv1.AttestationTPM
	merged := base
	merged.Spec.UserData = "#cloud-config\npackages: [git]\ntimezone: Europe/Berlin\nruncmd:\n- [echo, template]\nwrite_files:\n- path: /etc/motd\n  content: runner\n"
	download := base
	download.Spec.Agent = bootstrapv1.AgentSpec{DownloadURL: "https://example.invalid/hyperfleet-agent", SHA256: strings.Repeat("b", 64)}
	for name, in := range map[string]bootstrap.Input{"builtin": base, "spire": spire, "tpm": tpm, "template merged": merged, "agent download": download} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			userData, err := bootstrap.RenderUserData(in)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(os.WriteFile(filepath.Join(root, "tmp", "user-data"), []byte(userData), 0o600)).To(Succeed())
			out, err := exec.Command("chroot", root, "cloud-init", "schema", "--config-file", "/tmp/user-data").CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), "cloud-init schema: %s\n%s", out, userData)
			g.Expect(string(out)).To(ContainSubstring("Valid cloud-config"))
		})
	}
	g.Expect(root).NotTo(BeEmpty())
}

// mountImage mounts a writable raw copy of a qcow2 image's root file system and returns where.
func mountImage(t *testing.T, image string) string {
	t.Helper()
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	if out, err := exec.Command("qemu-img", "convert", "-O", "raw", image, raw).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, out)
	}
	offset, err := rootPartitionOffset(raw)
	if err != nil {
		t.Fatal(err)
	}
	loop, err := exec.Command("losetup", "--find", "--show", "--offset", strconv.FormatInt(offset, 10), raw).Output()
	if err != nil {
		t.Skipf("no loop device to mount the image: %v", err)
	}
	dev := strings.TrimSpace(string(loop))
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", dev).Run() })
	mnt := filepath.Join(dir, "root")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", dev, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	return mnt
}
