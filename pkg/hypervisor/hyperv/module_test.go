package hyperv

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv/module"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

const deployedDir = `C:\ProgramData\HyperFleet\Modules\HyperFleetHyperV\` + module.Version

// TestModuleDeployedOnConnect: a host without the module gets it on the first call, and only once.
func TestModuleDeployedOnConnect(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	_, err := env.p.Nodes(testCtx(t))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = env.p.OwnedVMs(testCtx(t))
	g.Expect(err).NotTo(HaveOccurred())
	for _, h := range env.hosts {
		psm, ok := env.hv.File(h, deployedDir+`\HyperFleetHyperV.psm1`)
		g.Expect(ok).To(BeTrue())
		g.Expect(psm.Data).To(Equal(module.Script()))
		psd, ok := env.hv.File(h, deployedDir+`\HyperFleetHyperV.psd1`)
		g.Expect(ok).To(BeTrue())
		g.Expect(psd.Data).To(Equal(module.Manifest()))
		g.Expect(env.hv.Calls()[h+"/probe"]).To(Equal(2), "probe, deploy, probe again; then never")
	}
}

// TestModuleRedeployedOnMismatch: a host holding another version's files in this version's
// folder (a half-finished deploy, an edited module) gets them replaced; a module removed behind
// HyperFleet's back is put back on the call that finds it gone.
func TestModuleRedeployedOnMismatch(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	old := []byte("@{\n    RootModule = 'HyperFleetHyperV.psm1'\n    ModuleVersion = '0.9.0'\n    FunctionsToExport = @('Get-HFInventory')\n}\n")
	g.Expect(env.hv.InstallModule("hv1", deployedDir, map[string][]byte{
		"HyperFleetHyperV.psd1": old, "HyperFleetHyperV.psm1": []byte("function Get-HFInventory { 'old' }"),
	})).To(Succeed())
	tampered := strings.Replace(string(module.Script()), "$ErrorActionPreference = 'Stop'", "$ErrorActionPreference = 'Continue'", 1)
	g.Expect(env.hv.InstallModule("hv2", deployedDir, map[string][]byte{
		"HyperFleetHyperV.psd1": module.Manifest(), "HyperFleetHyperV.psm1": []byte(tampered),
	})).To(Succeed())

	_, err := env.p.OwnedVMs(testCtx(t))
	g.Expect(err).NotTo(HaveOccurred())
	for _, h := range env.hosts {
		psm, _ := env.hv.File(h, deployedDir+`\HyperFleetHyperV.psm1`)
		g.Expect(psm.Data).To(Equal(module.Script()), h)
	}

	g.Expect(env.hv.RemoveFile("hv1", deployedDir+`\HyperFleetHyperV.psd1`)).To(Succeed())
	nodes, err := env.p.Nodes(testCtx(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nodes[0].Online).To(BeTrue(), "the call that found the module gone deployed it again and retried")
	_, ok := env.hv.File("hv1", deployedDir+`\HyperFleetHyperV.psd1`)
	g.Expect(ok).To(BeTrue())
}

// TestModuleManifest: the embedded manifest's version is the one HyperFleet expects, and it
// exports every function HyperFleet calls.
func TestModuleManifest(t *testing.T) {
	g := NewWithT(t)
	g.Expect(string(module.Manifest())).To(ContainSubstring("ModuleVersion     = '" + module.Version + "'"))
	for _, fn := range []string{fnInventory, fnVM, fnFindTemplate, fnNewVM, fnSetVM, fnStartVM, fnStopVM, fnRemoveVM, fnDismountSeed, fnAddDisks, fnSetAdapters} {
		g.Expect(string(module.Manifest())).To(ContainSubstring("'"+fn+"'"), fn)
		g.Expect(string(module.Script())).To(ContainSubstring("function "+fn+"([string]$InputBase64)"), fn)
	}
}

// TestCrashOutsideTheEnvelope: a terminating error (CLIXML on stderr, exit 1) is a transient
// failure carrying PowerShell's message, not a decoding error.
func TestCrashOutsideTheEnvelope(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	ref := cloneRunner(t, env.p, "hv1", "runner-5", "c5")
	env.hv.CrashNext("hv1", fnStartVM, "Start-VM : The Virtual Machine Management Service failed to start.")
	_, err := env.p.Start(testCtx(t), ref)
	g.Expect(err).To(MatchError(hypervisor.ErrTransient))
	g.Expect(err.Error()).To(ContainSubstring("Virtual Machine Management Service failed to start"))
	g.Expect(hypervisor.IsRetryable(err)).To(BeTrue())

	env.hv.FailNext("hv1", fnStartVM, "Busy", "'runner-5' failed to start. Not enough memory in the system.")
	_, err = env.p.Start(testCtx(t), ref)
	g.Expect(err).To(MatchError(hypervisor.ErrBusy))
}

// TestOlderModuleVersionIsLeftAndTheNewOneDeployed: a host holding an earlier release's module
// (without the checkpoint and move functions) gets this version in its own folder on the first
// call, and the new functions answer; the older folder is left for the release that uses it.
func TestOlderModuleVersionIsLeftAndTheNewOneDeployed(t *testing.T) {
	g := NewWithT(t)
	env := newEnv(t, hvsim.HyperVConfig{})
	oldDir := `C:\ProgramData\HyperFleet\Modules\HyperFleetHyperV\1.0.0`
	oldManifest := []byte("@{\n    RootModule = 'HyperFleetHyperV.psm1'\n    ModuleVersion = '1.0.0'\n    FunctionsToExport = @('Get-HFInventory', 'Get-HFVM')\n}\n")
	g.Expect(env.hv.InstallModule("hv1", oldDir, map[string][]byte{"HyperFleetHyperV.psd1": oldManifest, "HyperFleetHyperV.psm1": []byte("# 1.0.0")})).To(Succeed())
	ref := cloneRunner(t, env.p, "hv1", "db-u", "cu")
	_, err := env.p.CreateSnapshot(testCtx(t), ref, hypervisor.SnapshotSpec{Name: "hf-a"})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = env.p.CheckMigration(testCtx(t), ref)
	g.Expect(err).NotTo(HaveOccurred())
	psd, ok := env.hv.File("hv1", deployedDir+`\HyperFleetHyperV.psd1`)
	g.Expect(ok).To(BeTrue())
	g.Expect(string(psd.Data)).To(ContainSubstring("'New-HFCheckpoint'"))
	g.Expect(string(psd.Data)).To(ContainSubstring("'Start-HFMove'"))
	old, ok := env.hv.File("hv1", oldDir+`\HyperFleetHyperV.psd1`)
	g.Expect(ok).To(BeTrue())
	g.Expect(old.Data).To(Equal(oldManifest))
}
