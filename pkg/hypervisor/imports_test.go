package hypervisor_test

import (
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const module = "github.com/hyperfleet-io/hyperfleet/"

// proxmoxPackages are the packages that speak Proxmox VE: the provider and the client it uses.
var proxmoxPackages = []string{module + "pkg/hypervisor/proxmox", "github.com/luthermonson/go-proxmox"}

// mayNameProxmox are the only packages outside the Proxmox provider and its simulator whose code
// imports them: the registration file that links every provider into HyperFleet, the local
// fleet's wiring, the simulator's command, and the scale harness, which times the naive way
// (one go-proxmox status read per VM) beside the sweep's shared listing.
var mayNameProxmox = []string{
	module + "pkg/providers",
	module + "internal/devfleet",
	module + "cmd/pve-simulator",
	module + "test/scale",
	// The controllers' test harness tells HyperFleet's VMs on the simulator by their tag.
	module + "controllers/controllertest",
}

// TestOnlyTheProxmoxProviderNamesProxmoxTypes: controllers, the connection registry and every
// other package reach Proxmox VE through the provider-neutral hypervisor interface alone, so a
// second provider needs no change outside its own package and one registration line. Tests may
// still drive the real Proxmox client against the simulator.
func TestOnlyTheProxmoxProviderNamesProxmoxTypes(t *testing.T) {
	g := NewWithT(t)
	out, err := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	g.Expect(len(lines)).To(BeNumerically(">", 20), "go list saw the module's packages")
	sawController := false
	for _, line := range lines {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		if pkg == module+"controllers" {
			sawController = true
		}
		if isProxmoxOwn(pkg) || contains(mayNameProxmox, pkg) {
			continue
		}
		for _, imp := range imports {
			for _, px := range proxmoxPackages {
				g.Expect(imp == px || strings.HasPrefix(imp, px+"/")).To(BeFalse(), "%s imports %s", pkg, imp)
			}
		}
	}
	g.Expect(sawController).To(BeTrue())
}

func isProxmoxOwn(pkg string) bool {
	for _, own := range []string{module + "pkg/hypervisor/proxmox", module + "test/pvesim"} {
		if pkg == own || strings.HasPrefix(pkg, own+"/") {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// vspherePackages speak vSphere: the provider, govmomi (its client and its simulator).
var vspherePackages = []string{module + "pkg/hypervisor/vsphere", "github.com/vmware/govmomi"}

// mayNameVSphere are the only packages outside the vSphere provider and its simulator that import
// them: the registration file and the controllers' test harness, which points a HypervisorCluster
// at the simulator.
var mayNameVSphere = []string{
	module + "pkg/providers",
	module + "controllers/controllertest",
}

// TestOnlyTheVSphereProviderNamesVSphereTypes: as for Proxmox, the third provider is its own
// package, its simulator and one registration line; nothing else links govmomi.
func TestOnlyTheVSphereProviderNamesVSphereTypes(t *testing.T) {
	g := NewWithT(t)
	out, err := exec.Command("go", "list", "-e", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, imports := fields[0], fields[1:]
		if pkg == module+"pkg/hypervisor/vsphere" || strings.HasPrefix(pkg, module+"test/vspheresim") || contains(mayNameVSphere, pkg) {
			continue
		}
		for _, imp := range imports {
			for _, vs := range vspherePackages {
				g.Expect(imp == vs || strings.HasPrefix(imp, vs+"/")).To(BeFalse(), "%s imports %s", pkg, imp)
			}
		}
	}
}
