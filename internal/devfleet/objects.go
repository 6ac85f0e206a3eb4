package devfleet

import (
	"slices"
	"strconv"
	"strings"
	"time"

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
	glplatform "github.com/hyperfleet-io/hyperfleet/pkg/platform/gitlab"
)

// Names of the sample fleet's objects.
const (
	DefaultNamespace = "hyperfleet-dev"
	ClusterName      = "fleet"
	// HypervisorClusterName is also the prefix of its Secrets.
	HypervisorClusterName = "pve"
	TemplateName          = "runner"
	GitHubSecretName      = "github-app"
	GitHubCASecretName    = "github-ca"
	DefaultPoolName       = "linux-x64"
	// DefaultOrganization owns DefaultRepository on the fake GitHub; the pool takes the
	// organization's jobs.
	DefaultOrganization = "acme"
	DefaultRepository   = "acme/app"
	// RunnerTemplateVMID is the simulator's Ubuntu runner template.
	RunnerTemplateVMID = 9000
)

// DefaultLabels are the sample pool's runner labels.
var DefaultLabels = []string{"linux", "x64"}

// PoolOptions shape the sample RunnerPool.
type PoolOptions struct {
	Name     string
	Min, Max int32
	// Labels are the runners' labels (GitLab: tags; Buildkite: agent tags key=value).
	Labels []string
	// Queue is a Buildkite pool's queue; default DefaultQueue.
	Queue string
	// Organization scopes the pool to an organization; Repository (wins) to one repository.
	Organization, Repository string
	// IdleTimeout powers off a runner VM that got no job; the pool replaces it.
	IdleTimeout time.Duration
	// GitHubDemand is a GitHub pool's spec.platform.github.demand; empty is Webhook. Polling
	// also leaves the manager without a /webhooks/github route and the fake GitHub without a
	// webhook, as at a site no webhook can reach.
	GitHubDemand fleetv1.GitHubDemand
	// PollInterval is the GitHub pool's pollInterval when it polls; empty is the default.
	PollInterval time.Duration
}

func (p *PoolOptions) defaults() {
	if p.Name == "" {
		p.Name = DefaultPoolName
	}
	if p.Max == 0 {
		p.Min, p.Max = 1, 5
	}
	if len(p.Labels) == 0 {
		p.Labels = DefaultLabels
	}
	if p.Organization == "" && p.Repository == "" {
		p.Organization = DefaultOrganization
	}
	if p.IdleTimeout == 0 {
		p.IdleTimeout = 10 * time.Minute
	}
}

// sampleInput is what the sample objects point at.
type sampleInput struct {
	namespace           string
	pool                PoolOptions
	proxmoxURL          string // https://host:port, without /api2/json
	proxmoxCA           []byte
	tokenID, tokenSecet string
	githubURL           string
	githubCA            []byte
	appID               int64
	appKeyPEM           []byte
	installationID      int64
	runnerURL, runnerSH string
	// bootstrapTemplate names the pool's BootstrapConfigTemplate (its runner package).
	bootstrapTemplate string
	// spire, when set, makes VMs attest with SPIRE instead of the builtin CA.
	spire *SPIREState
	// gitlab, when set, makes the pool a GitLab pool of its group, with gitlabToken and gitlabCA.
	gitlab      *GitLabState
	gitlabToken string
	gitlabCA    []byte
	// buildkite, when set, makes the pool a Buildkite pool of its cluster queue, with
	// buildkiteToken and buildkiteCA.
	buildkite      *BuildkiteState
	buildkiteToken string
	buildkiteCA    []byte
	// hypervisor places the pool (Options.Hypervisor); hyperv and hypervCA describe the simulated
	// Hyper-V host when it runs.
	hypervisor string
	hyperv     *HyperVState
	hypervCA   []byte
	// vsphere and vsphereCA describe the simulated vCenter, nil when it does not run.
	vsphere   *VSphereState
	vsphereCA []byte
}

// sampleFleet is a runner fleet as a person would write it (templates/cluster-template.yaml with
// organization-level runners): credentials, a Cluster whose infrastructure is a HypervisorCluster
// and whose control plane is a FleetControlPlane (so every Cluster condition settles although
// runners never become Nodes), the runner templates and a RunnerPool.
func sampleFleet(in sampleInput) []client.Object {
	ns := in.namespace
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: ClusterName}}
	}
	p := in.pool
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: meta(HypervisorClusterName + "-credentials"), StringData: map[string]string{
			connection.KeyTokenID: in.tokenID, connection.KeyTokenSecret: in.tokenSecet}},
		&corev1.Secret{ObjectMeta: meta(HypervisorClusterName + "-ca"), Data: map[string][]byte{"ca.crt": in.proxmoxCA}},
		&corev1.Secret{ObjectMeta: meta(GitHubCASecretName), Data: map[string][]byte{"ca.crt": in.githubCA}},
		&corev1.Secret{ObjectMeta: meta(GitHubSecretName), StringData: map[string]string{
			ghplatform.KeyAppID: strconv.FormatInt(in.appID, 10), ghplatform.KeyPrivateKey: string(in.appKeyPEM),
			ghplatform.KeyInstallationID: strconv.FormatInt(in.installationID, 10)}},
		&infrav1.HypervisorCluster{ObjectMeta: meta(HypervisorClusterName), Spec: infrav1.HypervisorClusterSpec{
			Provider:       infrav1.ProviderProxmox,
			Endpoint:       in.proxmoxURL,
			CredentialsRef: infrav1.LocalSecretReference{Name: HypervisorClusterName + "-credentials"},
			CABundleRef:    &infrav1.SecretKeyReference{Name: HypervisorClusterName + "-ca", Key: "ca.crt"},
			Proxmox: &infrav1.ProxmoxClusterParameters{ISOStorage: "local",
				VMIDRange: &infrav1.VMIDRange{Start: 1000, End: 1999}},
		}},
		// The manager's default workload-reader ServiceAccount goes into the kubeconfig.
		&controlplanev1.FleetControlPlane{ObjectMeta: meta(ClusterName)},
		&clusterv1.Cluster{ObjectMeta: meta(ClusterName), Spec: clusterv1.ClusterSpec{
			ControlPlaneRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: controlplanev1.GroupVersion.Group, Kind: "FleetControlPlane", Name: ClusterName},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "HypervisorCluster", Name: HypervisorClusterName},
		}},
		&infrav1.MachineClaimTemplate{ObjectMeta: meta(TemplateName), Spec: infrav1.MachineClaimTemplateSpec{
			Template: infrav1.MachineClaimTemplateResource{Spec: infrav1.MachineClaimSpec{
				Template:  infrav1.TemplateSource{ID: strconv.Itoa(RunnerTemplateVMID)},
				CloneMode: infrav1.CloneLinked, Cores: 2, MemoryMiB: 2048,
				Network: &infrav1.NetworkSpec{Name: "vmbr0"}, Tags: []string{"ci"},
			}},
		}},
		&bootstrapv1.BootstrapConfigTemplate{ObjectMeta: meta(in.bootstrapTemplate), Spec: bootstrapv1.BootstrapConfigTemplateSpec{
			Template: bootstrapv1.BootstrapConfigTemplateResource{Spec: bootstrapv1.BootstrapConfigSpec{
				Attestation: attestation(in.spire),
				Runner: bootstrapv1.RunnerSpec{OS: "linux", Arch: "x64", DownloadURL: in.runnerURL, SHA256: in.runnerSH,
					IdleTimeout: &metav1.Duration{Duration: p.IdleTimeout}},
			}},
		}},
		&fleetv1.RunnerPool{ObjectMeta: meta(p.Name), Spec: fleetv1.RunnerPoolSpec{
			ClusterName: ClusterName, MinReplicas: p.Min, MaxReplicas: p.Max,
			Platform: samplePlatform(in),
			Template: fleetv1.RunnerMachineTemplate{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: infrav1.GroupVersion.Group, Kind: "MachineClaimTemplate", Name: TemplateName},
				BootstrapConfigRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: bootstrapv1.GroupVersion.Group, Kind: "BootstrapConfigTemplate", Name: in.bootstrapTemplate},
			},
		}},
	}
	if in.hyperv != nil {
		// Before the pool, as a person would create them.
		objs = slices.Insert(objs, len(objs)-1, hypervObjects(meta, in.hyperv, in.hypervCA)...)
	}
	if in.vsphere != nil {
		objs = slices.Insert(objs, len(objs)-1, vsphereObjects(meta, in.vsphere, in.vsphereCA)...)
	}
	placePool(objs[len(objs)-1].(*fleetv1.RunnerPool), in.hypervisor)
	if in.gitlab != nil {
		// Before the pool, as a person would create them.
		objs = slices.Insert(objs, 1, []client.Object{
			&corev1.Secret{ObjectMeta: meta(GitLabSecretName), StringData: map[string]string{glplatform.KeyToken: in.gitlabToken}},
			&corev1.Secret{ObjectMeta: meta(GitLabCASecretName), Data: map[string][]byte{glplatform.DefaultCAKey: in.gitlabCA}},
		}...)
	}
	if in.buildkite != nil {
		// Before the pool, as a person would create them.
		objs = slices.Insert(objs, 1, buildkiteSecrets(meta, in.buildkiteToken, in.buildkiteCA)...)
	}
	return objs
}

// samplePlatform is the sample pool's spec.platform: GitHub Actions for the organization (or
// repository), or GitLab CI for the fake GitLab's group.
func samplePlatform(in sampleInput) fleetv1.PlatformSpec {
	p := in.pool
	if bk := in.buildkite; bk != nil {
		return buildkitePlatform(bk, p.Labels)
	}
	if gl := in.gitlab; gl != nil {
		return fleetv1.PlatformSpec{GitLab: &fleetv1.GitLabSpec{
			URL: gl.URL, Scope: fleetv1.GitLabScope{Group: gl.Group}, Tags: p.Labels,
			AccessLevel:    fleetv1.GitLabNotProtected,
			CredentialsRef: fleetv1.LocalObjectReference{Name: GitLabSecretName},
			// HTTPS on 127.0.0.1 with the fake's own CA, as a self-managed GitLab behind a
			// private CA would be.
			CABundleRef: &fleetv1.SecretKeyReference{Name: GitLabCASecretName, Key: glplatform.DefaultCAKey},
		}}
	}
	return fleetv1.PlatformSpec{GitHub: &fleetv1.GitHubSpec{
		Organization: p.Organization, Repository: p.Repository, Labels: p.Labels,
		CredentialsRef: fleetv1.LocalObjectReference{Name: GitHubSecretName}, APIURL: in.githubURL + "/",
		// The local fake GitHub serves HTTPS on 127.0.0.1 with its own CA, as a GitHub
		// Enterprise Server behind a private CA would.
		CABundleRef: &fleetv1.SecretKeyReference{Name: GitHubCASecretName, Key: "ca.crt"},
		Demand:      p.GitHubDemand,
		PollInterval: func() *metav1.Duration {
			if p.PollInterval == 0 {
				return nil
			}
			return &metav1.Duration{Duration: p.PollInterval}
		}(),
	}}
}

// jobRepository is the repository jobs for pool are created in.
// attestation is the sample's identity: the builtin CA, or the fleet's SPIRE server.
func attestation(spire *SPIREState) bootstrapv1.AttestationSpec {
	a := bootstrapv1.AttestationSpec{Method: bootstrapv1.AttestationJoinToken, Provider: bootstrapv1.IdentityBuiltin, TrustDomain: TrustDomain}
	if spire != nil {
		a.Provider, a.SPIREServerAddress = bootstrapv1.IdentitySPIRE, spire.AdminAddress
	}
	return a
}

func jobRepository(p PoolOptions) string {
	if p.Repository != "" {
		return p.Repository
	}
	if strings.EqualFold(p.Organization, DefaultOrganization) {
		return DefaultRepository
	}
	return p.Organization + "/app"
}
