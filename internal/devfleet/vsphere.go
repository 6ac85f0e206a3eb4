package devfleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
	"github.com/hyperfleet-io/hyperfleet/test/vspheresim"
)

// Hypervisors of the sample pool beyond Proxmox and Hyper-V (Options.Hypervisor).
const (
	HypervisorVSphere = "vsphere"
	// HypervisorAll makes one pool whose targets are the Proxmox, the Hyper-V and the vSphere cluster.
	HypervisorAll = "all"
)

// Names of the vSphere third of the sample fleet.
const (
	VSphereClusterName           = "fleet-vc"
	VSphereHypervisorClusterName = "vc"
	VSphereTemplateName          = "runner-vc"
	// VSphereTemplate is the simulated vCenter's runner template.
	VSphereTemplate = "ubuntu-2404-runner"
)

// VSphereState is how to reach the simulated vCenter (Hypervisor vsphere or all).
type VSphereState struct {
	URL        string `json:"url"`
	Username   string `json:"username"`
	Password   string `json:"password"`
	CAFile     string `json:"caFile"`
	Datacenter string `json:"datacenter"`
	Cluster    string `json:"cluster"`
	Datastore  string `json:"datastore"`
}

// usesVSphere reports whether the fleet runs the vCenter simulator.
func usesVSphere(hypervisor string) bool {
	return hypervisor == HypervisorVSphere || hypervisor == HypervisorAll
}

// usesHyperV reports whether the fleet runs the Hyper-V simulator.
func usesHyperV(hypervisor string) bool {
	return hypervisor == HypervisorHyperV || hypervisor == HypervisorBoth || hypervisor == HypervisorAll
}

// startVSphere starts VMware's vCenter simulator on loopback, whose guests run the real agent
// from each VM's guestinfo user-data as the Proxmox simulator's do from their seed ISO.
func (f *Fleet) startVSphere(agentBin string) error {
	b := &booter{agentBin: agentBin, spireAgentBin: f.spireAgentBin, logDir: f.State.LogDir, jobDuration: f.opts.JobDuration, observe: f.opts.OnVMEvent}
	sim, err := vspheresim.Start(vspheresim.Config{Password: randomHex(12), BootHook: func(ctx context.Context, vm vspheresim.BootVM) error {
		return b.hook(ctx, pvesim.BootVM{Node: vm.Host, Name: vm.Name, IP: vm.IP, UserData: vm.UserData,
			MetaData: vm.MetaData, NetworkConfig: vm.NetworkConfig, VendorData: vm.VendorData, PowerOff: vm.PowerOff})
	}})
	if err != nil {
		return fmt.Errorf("starting the vCenter simulator: %w", err)
	}
	f.VSphere = sim
	caFile := filepath.Join(f.stateDir, "vc-ca.crt")
	if err := os.WriteFile(caFile, sim.CA, 0o600); err != nil {
		return err
	}
	f.State.VSphere = &VSphereState{URL: sim.URL, Username: sim.Username, Password: sim.Password, CAFile: caFile,
		Datacenter: sim.Datacenter, Cluster: sim.Cluster, Datastore: sim.Datastore}
	return nil
}

// vsphereCA is the simulated vCenter's CA certificate, nil when it does not run.
func (f *Fleet) vsphereCA() []byte {
	if f.VSphere == nil {
		return nil
	}
	return f.VSphere.CA
}

// vsphereObjects are the vSphere third of the sample fleet (hypervisorFleet): the
// HypervisorCluster of the simulated vCenter and the MachineClaimTemplate of linked clones of its
// runner template.
func vsphereObjects(meta func(string) metav1.ObjectMeta, vc *VSphereState, ca []byte) []client.Object {
	return hypervisorFleet(meta, VSphereClusterName, VSphereHypervisorClusterName, VSphereTemplateName, vc.Username, vc.Password, ca,
		infrav1.HypervisorClusterSpec{Provider: infrav1.ProviderVSphere, Endpoint: vc.URL,
			VSphere: &infrav1.VSphereClusterParameters{Datacenter: vc.Datacenter, ComputeCluster: vc.Cluster, Datastore: vc.Datastore}},
		infrav1.MachineClaimSpec{Template: infrav1.TemplateSource{Name: VSphereTemplate, Tags: []string{"runner"}},
			CloneMode: infrav1.CloneLinked, Cores: 2, MemoryMiB: 2048, Tags: []string{"ci"}})
}
