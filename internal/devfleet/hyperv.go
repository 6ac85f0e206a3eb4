package devfleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	controlplanev1 "github.com/hyperfleet-io/hyperfleet/api/controlplane/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// Hypervisors of the sample pool (Options.Hypervisor).
const (
	HypervisorProxmox = "proxmox"
	HypervisorHyperV  = "hyperv"
	// HypervisorBoth makes one pool whose targets are the Proxmox and the Hyper-V cluster.
	HypervisorBoth = "both"
)

// Names of the Hyper-V half of the sample fleet.
const (
	HyperVClusterName           = "fleet-hv"
	HyperVHypervisorClusterName = "hv"
	HyperVTemplateName          = "runner-hv"
	// HyperVHost is the simulated Hyper-V host's name.
	HyperVHost = "hv1"
)

// HyperVState is how to reach the simulated Hyper-V host (Hypervisor hyperv or both).
type HyperVState struct {
	Host     string `json:"host"`
	URL      string `json:"url"`
	Username string `json:"username"`
	Password string `json:"password"`
	CAFile   string `json:"caFile"`
}

// startHyperV starts the WS-Management simulator of one Hyper-V host, listening on loopback,
// whose boot hook runs the real agent from each VM's seed ISO user-data as the Proxmox one does.
func (f *Fleet) startHyperV(agentBin string) error {
	log, err := f.fileLogger("hv-simulator.log")
	if err != nil {
		return err
	}
	b := &booter{agentBin: agentBin, spireAgentBin: f.spireAgentBin, logDir: f.State.LogDir, jobDuration: f.opts.JobDuration, observe: f.opts.OnVMEvent}
	password := randomHex(12)
	sim, err := hvsim.StartHyperV(hvsim.HyperVConfig{Logger: log, BootHook: func(ctx context.Context, vm hvsim.HyperVBootVM) error {
		// The booter speaks of VMs as the Proxmox simulator shows them; a Hyper-V VM has a GUID
		// and no number, and its name is unique.
		return b.hook(ctx, pvesim.BootVM{Node: vm.Host, Name: vm.Name, IP: vm.IP, MAC: vm.MAC, UserData: vm.UserData,
			MetaData: vm.MetaData, NetworkConfig: vm.NetworkConfig, VendorData: vm.VendorData, PowerOff: vm.PowerOff})
	}}, hvsim.Options{Users: map[string]string{hvsim.HyperVTestUser: password}}, HyperVHost)
	if err != nil {
		return fmt.Errorf("starting the Hyper-V simulator: %w", err)
	}
	f.HyperV = sim
	caFile := filepath.Join(f.stateDir, "hv-ca.crt")
	if err := os.WriteFile(caFile, sim.CAPEM, 0o600); err != nil {
		return err
	}
	f.State.HyperV = &HyperVState{Host: HyperVHost, URL: sim.Servers[HyperVHost].URL(), Username: hvsim.HyperVTestUser,
		Password: password, CAFile: caFile}
	return nil
}

// hypervObjects are the Hyper-V half of the sample fleet (hypervisorFleet): the HypervisorCluster
// of the simulated host and the MachineClaimTemplate of linked clones of the simulator's template.
func hypervObjects(meta func(string) metav1.ObjectMeta, hv *HyperVState, ca []byte) []client.Object {
	return hypervisorFleet(meta, HyperVClusterName, HyperVHypervisorClusterName, HyperVTemplateName, hv.Username, hv.Password, ca,
		infrav1.HypervisorClusterSpec{Provider: infrav1.ProviderHyperV, Endpoint: hv.URL,
			HyperV: &infrav1.HyperVClusterParameters{Hosts: []infrav1.HyperVHost{{Name: hv.Host, Endpoint: hv.URL}}}},
		infrav1.MachineClaimSpec{Template: infrav1.TemplateSource{Name: hvsim.HyperVTemplate},
			CloneMode: infrav1.CloneLinked, Cores: 2, MemoryMiB: 2048,
			Network: &infrav1.NetworkSpec{Name: hvsim.HyperVSwitch}, Tags: []string{"ci"}})
}

// hypervisorFleet is one simulated hypervisor's part of the sample fleet: its credentials and CA,
// its HypervisorCluster (hc, with the Secrets filled in), its own Cluster (a Cluster has one
// infrastructure) with its FleetControlPlane, and the MachineClaimTemplate of claim.
func hypervisorFleet(meta func(string) metav1.ObjectMeta, cluster, hcName, template, user, password string, ca []byte,
	hc infrav1.HypervisorClusterSpec, claim infrav1.MachineClaimSpec) []client.Object {
	withCluster := func(name string) metav1.ObjectMeta {
		m := meta(name)
		m.Labels[clusterv1.ClusterNameLabel] = cluster
		return m
	}
	hc.CredentialsRef = infrav1.LocalSecretReference{Name: hcName + "-credentials"}
	hc.CABundleRef = &infrav1.SecretKeyReference{Name: hcName + "-ca", Key: "ca.crt"}
	return []client.Object{
		&corev1.Secret{ObjectMeta: withCluster(hcName + "-credentials"), StringData: map[string]string{
			connection.KeyUsername: user, connection.KeyPassword: password}},
		&corev1.Secret{ObjectMeta: withCluster(hcName + "-ca"), Data: map[string][]byte{"ca.crt": ca}},
		&infrav1.HypervisorCluster{ObjectMeta: withCluster(hcName), Spec: hc},
		&controlplanev1.FleetControlPlane{ObjectMeta: withCluster(cluster)},
		&clusterv1.Cluster{ObjectMeta: withCluster(cluster), Spec: clusterv1.ClusterSpec{
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: controlplanev1.GroupVersion.Group, Kind: "FleetControlPlane", Name: cluster},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "HypervisorCluster", Name: hcName},
		}},
		&infrav1.MachineClaimTemplate{ObjectMeta: withCluster(template), Spec: infrav1.MachineClaimTemplateSpec{
			Template: infrav1.MachineClaimTemplateResource{Spec: claim}}},
	}
}

// placePool points the sample pool at its hypervisors: hyperv (vsphere) makes it a pool of the
// Hyper-V (vSphere) Cluster, both gives it two targets of equal priority, so runners alternate
// between them, and all three.
func placePool(pool *fleetv1.RunnerPool, hypervisor string) {
	ref := func(name string) clusterv1.ContractVersionedObjectReference {
		return clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "MachineClaimTemplate", Name: name}
	}
	switch hypervisor {
	case HypervisorHyperV:
		pool.Spec.ClusterName = HyperVClusterName
		pool.Labels[clusterv1.ClusterNameLabel] = HyperVClusterName
		pool.Spec.Template.InfrastructureRef = ref(HyperVTemplateName)
	case HypervisorVSphere:
		pool.Spec.ClusterName = VSphereClusterName
		pool.Labels[clusterv1.ClusterNameLabel] = VSphereClusterName
		pool.Spec.Template.InfrastructureRef = ref(VSphereTemplateName)
	case HypervisorBoth, HypervisorAll:
		pool.Spec.Template.InfrastructureRef = clusterv1.ContractVersionedObjectReference{}
		pool.Spec.Template.Targets = []fleetv1.RunnerTarget{
			{Name: HypervisorProxmox, ClusterName: ClusterName, InfrastructureRef: ref(TemplateName), Weight: 1},
			{Name: HypervisorHyperV, ClusterName: HyperVClusterName, InfrastructureRef: ref(HyperVTemplateName), Weight: 1},
		}
		if hypervisor == HypervisorAll {
			pool.Spec.Template.Targets = append(pool.Spec.Template.Targets,
				fleetv1.RunnerTarget{Name: HypervisorVSphere, ClusterName: VSphereClusterName, InfrastructureRef: ref(VSphereTemplateName), Weight: 1})
		}
	}
}
