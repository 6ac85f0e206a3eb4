package scale

import (
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	controlplanev1 "github.com/hyperfleet-io/hyperfleet/api/controlplane/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	ghplatform "github.com/hyperfleet-io/hyperfleet/pkg/platform/github"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

const (
	clusterName   = "fleet"
	hvClusterName = "fleet-hv"
	hvPoolName    = "soak-hv"
)

// objects is the fleet a person would write for this run: credentials, a Cluster whose
// infrastructure is a HypervisorCluster over the simulated nodes and whose control plane is a
// FleetControlPlane, a runner template found by name on every node, and one RunnerPool.
func (h *harness) objects() []client.Object {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{clusterv1.ClusterNameLabel: clusterName}}
	}
	end := firstVMID + 9999
	objs := []client.Object{
		&corev1.Secret{ObjectMeta: meta("pve-credentials"), StringData: map[string]string{
			connection.KeyTokenID: simulatorToken.ID, connection.KeyTokenSecret: simulatorToken.Secret}},
		&corev1.Secret{ObjectMeta: meta("pve-ca"), Data: map[string][]byte{"ca.crt": h.sim.CACertPEM()}},
		&corev1.Secret{ObjectMeta: meta("github-ca"), Data: map[string][]byte{"ca.crt": h.github.CACertPEM()}},
		&corev1.Secret{ObjectMeta: meta("github-app"), StringData: map[string]string{
			ghplatform.KeyAppID: strconv.FormatInt(h.github.AppID(), 10), ghplatform.KeyPrivateKey: string(h.github.AppKeyPEM()),
			ghplatform.KeyInstallationID: strconv.FormatInt(h.github.InstallationID(org), 10)}},
		&infrav1.HypervisorCluster{ObjectMeta: meta("pve"), Spec: infrav1.HypervisorClusterSpec{
			Provider:       infrav1.ProviderProxmox,
			Endpoint:       strings.TrimSuffix(h.sim.URL(), "/api2/json"),
			CredentialsRef: infrav1.LocalSecretReference{Name: "pve-credentials"},
			CABundleRef:    &infrav1.SecretKeyReference{Name: "pve-ca", Key: "ca.crt"},
			Proxmox: &infrav1.ProxmoxClusterParameters{ISOStorage: "local",
				VMIDRange: &infrav1.VMIDRange{Start: firstVMID, End: int32(end)}},
		}},
		&controlplanev1.FleetControlPlane{ObjectMeta: meta(clusterName)},
		&clusterv1.Cluster{ObjectMeta: meta(clusterName), Spec: clusterv1.ClusterSpec{
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: controlplanev1.GroupVersion.Group, Kind: "FleetControlPlane", Name: clusterName},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "HypervisorCluster", Name: "pve"},
		}},
		&infrav1.MachineClaimTemplate{ObjectMeta: meta("runner"), Spec: infrav1.MachineClaimTemplateSpec{
			Template: infrav1.MachineClaimTemplateResource{Spec: infrav1.MachineClaimSpec{
				Template:  infrav1.TemplateSource{Name: "runner"},
				CloneMode: infrav1.CloneLinked, Cores: 2, MemoryMiB: 2048,
				Network: &infrav1.NetworkSpec{Name: "vmbr0"}, Tags: []string{"ci"},
			}},
		}},
		&bootstrapv1.BootstrapConfigTemplate{ObjectMeta: meta("runner"), Spec: bootstrapv1.BootstrapConfigTemplateSpec{
			Template: bootstrapv1.BootstrapConfigTemplateResource{Spec: bootstrapv1.BootstrapConfigSpec{
				Attestation: bootstrapv1.AttestationSpec{Method: bootstrapv1.AttestationJoinToken,
					Provider: bootstrapv1.IdentityBuiltin, TrustDomain: trustDomain},
				Runner: bootstrapv1.RunnerSpec{OS: "linux", Arch: "x64"},
			}},
		}},
		&fleetv1.RunnerPool{ObjectMeta: meta(poolName), Spec: fleetv1.RunnerPoolSpec{
			ClusterName: clusterName, MinReplicas: h.opts.minRunners, MaxReplicas: h.opts.maxRunners,
			Platform: fleetv1.PlatformSpec{GitHub: &fleetv1.GitHubSpec{
				Organization: org, Labels: h.opts.labels,
				CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"}, APIURL: h.github.URL() + "/",
				CABundleRef: &fleetv1.SecretKeyReference{Name: "github-ca", Key: "ca.crt"},
			}},
			Template: fleetv1.RunnerMachineTemplate{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: "MachineClaimTemplate", Name: "runner"},
				BootstrapConfigRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: bootstrapv1.GroupVersion.Group, Kind: "BootstrapConfigTemplate", Name: "runner"},
			},
		}},
	}
	if h.hv != nil {
		objs = append(objs, h.hypervObjects()...)
	}
	return objs
}

// hypervObjects are the Hyper-V half: credentials and CA, the HypervisorCluster of the simulated
// host, its own Cluster (a Cluster has one infrastructure), a claim template of linked clones of
// the host's template, and a pool of its own with hypervLabels.
func (h *harness) hypervObjects() []client.Object {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{clusterv1.ClusterNameLabel: hvClusterName}}
	}
	pool := &fleetv1.RunnerPool{ObjectMeta: meta(hvPoolName), Spec: fleetv1.RunnerPoolSpec{
		ClusterName: hvClusterName, MinReplicas: h.opts.minRunners, MaxReplicas: h.opts.maxRunners,
		Platform: fleetv1.PlatformSpec{GitHub: &fleetv1.GitHubSpec{
			Organization: org, Labels: h.opts.hypervLabels,
			CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"}, APIURL: h.github.URL() + "/",
			CABundleRef: &fleetv1.SecretKeyReference{Name: "github-ca", Key: "ca.crt"},
		}},
		Template: fleetv1.RunnerMachineTemplate{
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MachineClaimTemplate", Name: "runner-hv"},
			BootstrapConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapv1.GroupVersion.Group, Kind: "BootstrapConfigTemplate", Name: "runner"},
		},
	}}
	return []client.Object{
		&corev1.Secret{ObjectMeta: meta("hv-credentials"), StringData: map[string]string{
			connection.KeyUsername: hvsim.HyperVTestUser, connection.KeyPassword: h.hvPass}},
		&corev1.Secret{ObjectMeta: meta("hv-ca"), Data: map[string][]byte{"ca.crt": h.hv.CAPEM}},
		&infrav1.HypervisorCluster{ObjectMeta: meta("hv"), Spec: infrav1.HypervisorClusterSpec{
			Provider:       infrav1.ProviderHyperV,
			Endpoint:       h.hv.Servers[hypervHost].URL(),
			CredentialsRef: infrav1.LocalSecretReference{Name: "hv-credentials"},
			CABundleRef:    &infrav1.SecretKeyReference{Name: "hv-ca", Key: "ca.crt"},
			HyperV: &infrav1.HyperVClusterParameters{Hosts: []infrav1.HyperVHost{
				{Name: hypervHost, Endpoint: h.hv.Servers[hypervHost].URL()}}},
		}},
		&controlplanev1.FleetControlPlane{ObjectMeta: meta(hvClusterName)},
		&clusterv1.Cluster{ObjectMeta: meta(hvClusterName), Spec: clusterv1.ClusterSpec{
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: controlplanev1.GroupVersion.Group, Kind: "FleetControlPlane", Name: hvClusterName},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "HypervisorCluster", Name: "hv"},
		}},
		&infrav1.MachineClaimTemplate{ObjectMeta: meta("runner-hv"), Spec: infrav1.MachineClaimTemplateSpec{
			Template: infrav1.MachineClaimTemplateResource{Spec: infrav1.MachineClaimSpec{
				Template:  infrav1.TemplateSource{Name: hvsim.HyperVTemplate},
				CloneMode: infrav1.CloneLinked, Cores: 2, MemoryMiB: 2048,
				Network: &infrav1.NetworkSpec{Name: hvsim.HyperVSwitch}, Tags: []string{"ci"},
			}},
		}},
		pool,
	}
}
