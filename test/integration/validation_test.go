package integration

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

func newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// TestValidationRules proves that each validation rule refuses a bad object with the message a person
// needs, and that the smallest valid object of each kind is accepted.
func TestValidationRules(t *testing.T) {
	ns := newNamespace(t, "validation")
	cases := []struct {
		name    string
		obj     client.Object
		message string // empty: the object must be accepted
	}{
		{name: "valid HypervisorCluster", obj: builder.NewHypervisorCluster("ok", ns).Build()},
		{
			name:    "HypervisorCluster endpoint without scheme",
			obj:     builder.NewHypervisorCluster("noscheme", ns).WithEndpoint("pve.example.com:8006").Build(),
			message: "endpoint must be an http:// or https:// URL",
		},
		{
			name:    "HypervisorCluster CA bundle and insecure together",
			obj:     builder.NewHypervisorCluster("both", ns).WithCABundle("ca", "ca.crt").WithInsecure().Build(),
			message: "set either caBundleRef or insecureSkipTLSVerify, not both",
		},
		{
			name: "HypervisorCluster reversed VMID range",
			obj: builder.NewHypervisorCluster("range", ns).WithProxmox(infrav1.ProxmoxClusterParameters{
				VMIDRange: &infrav1.VMIDRange{Start: 2000, End: 1000}}).Build(),
			message: "vmidRange.start must not be greater than vmidRange.end",
		},
		{
			name: "HypervisorCluster drain backoff capped below its first wait",
			obj: func() *infrav1.HypervisorCluster {
				hc := builder.NewHypervisorCluster("drain", ns).Build()
				hc.Spec.DrainPolicy = &infrav1.DrainPolicy{MaxAttempts: 3, RetryInitialSeconds: 120, RetryMaxSeconds: 60}
				return hc
			}(),
			message: "retryMaxSeconds must not be below retryInitialSeconds",
		},
		{
			name: "HypervisorCluster snippets delivery",
			obj: builder.NewHypervisorCluster("snip", ns).WithProxmox(infrav1.ProxmoxClusterParameters{
				CloudInitDelivery: infrav1.CloudInitSnippets}).Build(),
			message: "cloudInitDelivery Snippets is not supported: Proxmox VE's API cannot upload snippets",
		},
		{
			name: "HypervisorCluster snippets storage",
			obj: builder.NewHypervisorCluster("snipstore", ns).WithProxmox(infrav1.ProxmoxClusterParameters{
				SnippetsStorage: "local"}).Build(),
			message: "snippetsStorage is not used",
		},
		{
			name: "valid HypervisorCluster with ISO delivery",
			obj: builder.NewHypervisorCluster("iso", ns).WithProxmox(infrav1.ProxmoxClusterParameters{
				CloudInitDelivery: infrav1.CloudInitISO, ISOStorage: "local"}).Build(),
		},
		{
			name: "Hyper-V HypervisorCluster naming a failover cluster",
			obj: withProvider(builder.NewHypervisorCluster("hv-fc", ns).WithEndpoint("https://hv1.example.com:5986/wsman").Build(),
				infrav1.ProviderHyperV, nil, &infrav1.HyperVClusterParameters{FailoverCluster: "fc1"}),
			message: "failoverCluster is not supported yet",
		},
		{
			name:    "HypervisorCluster bad node name",
			obj:     builder.NewHypervisorCluster("node", ns).WithAllowedNodes("pve_1!").Build(),
			message: "spec.allowedNodes[0]",
		},
		{
			name: "valid Hyper-V HypervisorCluster",
			obj: withProvider(builder.NewHypervisorCluster("hyperv", ns).WithEndpoint("https://hv1.example.com:5986/wsman").Build(),
				infrav1.ProviderHyperV, nil, &infrav1.HyperVClusterParameters{Auth: infrav1.HyperVAuthNTLM, VHDPath: `D:\HyperFleet\Disks`,
					Hosts: []infrav1.HyperVHost{{Name: "hv1", Endpoint: "https://hv1.example.com:5986/wsman"}, {Name: "hv2", Endpoint: "https://hv2.example.com:5986/wsman"}}}),
		},
		{
			name: "HypervisorCluster Proxmox settings under Hyper-V",
			obj: withProvider(builder.NewHypervisorCluster("hv-px", ns).Build(), infrav1.ProviderHyperV,
				&infrav1.ProxmoxClusterParameters{Pool: "ci"}, nil),
			message: "spec.proxmox applies only to provider Proxmox",
		},
		{
			name: "HypervisorCluster Hyper-V settings under Proxmox",
			obj: withProvider(builder.NewHypervisorCluster("px-hv", ns).Build(), infrav1.ProviderProxmox,
				nil, &infrav1.HyperVClusterParameters{Auth: infrav1.HyperVAuthBasic}),
			message: "spec.hyperv applies only to provider hyperv",
		},
		{
			name: "valid vSphere HypervisorCluster",
			obj: builder.NewHypervisorCluster("vc", ns).WithEndpoint("https://vcenter.example.com").
				WithVSphere(infrav1.VSphereClusterParameters{Datacenter: "DC0", ComputeCluster: "C0", Datastore: "ds-ssd"}).Build(),
		},
		{
			name: "HypervisorCluster vSphere settings under Proxmox",
			obj: func() *infrav1.HypervisorCluster {
				hc := builder.NewHypervisorCluster("px-vc", ns).WithVSphere(infrav1.VSphereClusterParameters{Datacenter: "DC0"}).Build()
				hc.Spec.Provider = infrav1.ProviderProxmox
				return hc
			}(),
			message: "spec.vsphere applies only to provider vsphere",
		},
		{
			name: "HypervisorCluster Hyper-V path that is not a Windows path",
			obj: withProvider(builder.NewHypervisorCluster("hv-path", ns).Build(), infrav1.ProviderHyperV,
				nil, &infrav1.HyperVClusterParameters{VMPath: `C:\VMs'; Remove-Item C:\ -Recurse; '`}),
			message: "spec.hyperv.vmPath",
		},
		{
			name: "HypervisorCluster Hyper-V module path that ends its PowerShell string with a typographic quote",
			obj: withProvider(builder.NewHypervisorCluster("hv-inject", ns).Build(), infrav1.ProviderHyperV, nil,
				&infrav1.HyperVClusterParameters{ModulePath: "C:\\HF\u2019; Stop-VM -Name team-b-db -TurnOff -Force; \u2019x"}),
			message: "must hold no quote of any kind",
		},
		{
			name: "HypervisorCluster Hyper-V VM path with a left single quote",
			obj: withProvider(builder.NewHypervisorCluster("hv-q1", ns).Build(), infrav1.ProviderHyperV, nil,
				&infrav1.HyperVClusterParameters{VMPath: "C:\\VMs\u2018x"}),
			message: "must hold no quote of any kind",
		},
		{
			name: "HypervisorCluster Hyper-V VHD path with a low-9 quote",
			obj: withProvider(builder.NewHypervisorCluster("hv-q2", ns).Build(), infrav1.ProviderHyperV, nil,
				&infrav1.HyperVClusterParameters{VHDPath: "D:\\Disks\u201ax"}),
			message: "must hold no quote of any kind",
		},
		{
			name: "HypervisorCluster Hyper-V template path with a reversed-9 quote",
			obj: withProvider(builder.NewHypervisorCluster("hv-q3", ns).Build(), infrav1.ProviderHyperV, nil,
				&infrav1.HyperVClusterParameters{TemplatePath: "D:\\Templates\u201bx"}),
			message: "must hold no quote of any kind",
		},
		{
			name: "HypervisorCluster Hyper-V seed path on a share with a typographic double quote",
			obj: withProvider(builder.NewHypervisorCluster("hv-q4", ns).Build(), infrav1.ProviderHyperV, nil,
				&infrav1.HyperVClusterParameters{SeedISOPath: "\\\\fs\\seeds\u201c$(Stop-VM db)\u201d"}),
			message: "must hold no quote of any kind",
		},
		{
			name: "HypervisorCluster Hyper-V module path with a line break",
			obj: withProvider(builder.NewHypervisorCluster("hv-nl", ns).Build(), infrav1.ProviderHyperV, nil,
				&infrav1.HyperVClusterParameters{ModulePath: "C:\\HF\nStop-VM db"}),
			message: "no control character",
		},
		{
			name: "valid Hyper-V HypervisorCluster with letters beyond ASCII in its paths",
			obj: withProvider(builder.NewHypervisorCluster("hv-utf8", ns).Build(), infrav1.ProviderHyperV, nil,
				&infrav1.HyperVClusterParameters{VMPath: `D:\Läufer\VMs`, SeedISOPath: `\\fs\Flotte\Seeds`}),
		},
		{
			name: "HypervisorCluster Hyper-V hosts with one name twice",
			obj: withProvider(builder.NewHypervisorCluster("hv-dup", ns).Build(), infrav1.ProviderHyperV, nil,
				&infrav1.HyperVClusterParameters{Hosts: []infrav1.HyperVHost{{Name: "hv1", Endpoint: "https://a:5986/wsman"}, {Name: "hv1", Endpoint: "https://b:5986/wsman"}}}),
			message: "hosts must have distinct names",
		},
		{
			name: "HypervisorCluster Hyper-V Secure Boot template that does not exist",
			obj: withProvider(builder.NewHypervisorCluster("hv-sb", ns).Build(), infrav1.ProviderHyperV, nil,
				&infrav1.HyperVClusterParameters{SecureBootTemplate: "MicrosoftLinux"}),
			message: "spec.hyperv.secureBootTemplate",
		},
		{name: "valid MachineClaim by id", obj: builder.NewMachineClaim("vmid", ns).Build()},
		{
			name: "valid MachineClaim by GUID",
			obj:  builder.NewMachineClaim("guid", ns).WithTemplate(infrav1.TemplateSource{ID: "5f0c2a8e-9b1d-4c3e-8f7a-2d6e1b0c9a47"}).Build(),
		},
		{
			name:    "MachineClaim template id that could walk an API path",
			obj:     builder.NewMachineClaim("walk", ns).WithTemplate(infrav1.TemplateSource{ID: "9000/../100"}).Build(),
			message: "spec.template.id",
		},
		{name: "valid MachineClaim by name and tags", obj: builder.NewMachineClaim("byname", ns).WithTemplateName("ubuntu", "runner").Build()},
		{
			name: "MachineClaim template by vmid and name",
			obj: builder.NewMachineClaim("both", ns).WithTemplate(infrav1.TemplateSource{
				ID: "9000", Name: "ubuntu"}).Build(),
			message: "select the template either by id or by name/tags, not both and not neither",
		},
		{
			name:    "MachineClaim template selector empty",
			obj:     builder.NewMachineClaim("neither", ns).WithTemplate(infrav1.TemplateSource{}).Build(),
			message: "select the template either by id or by name/tags, not both and not neither",
		},
		{
			name:    "MachineClaim storage on a linked clone",
			obj:     builder.NewMachineClaim("linked", ns).WithClone(infrav1.CloneLinked, "local-lvm").Build(),
			message: "proxmox.storage can only be chosen for a Full clone",
		},
		{name: "valid MachineClaim full clone to storage", obj: builder.NewMachineClaim("full", ns).WithClone(infrav1.CloneFull, "local-lvm").Build()},
		{
			name:    "MachineClaim too little memory",
			obj:     builder.NewMachineClaim("mem", ns).WithResources(2, 64).Build(),
			message: "spec.memoryMiB",
		},
		{
			name:    "MachineClaim VLAN out of range",
			obj:     builder.NewMachineClaim("vlan", ns).WithNetwork("vmbr0", 5000).Build(),
			message: "spec.network.vlan",
		},
		{
			name:    "MachineClaim tag Proxmox would refuse",
			obj:     builder.NewMachineClaim("tag", ns).WithTags("Bad Tag").Build(),
			message: "spec.tags[0]",
		},
		{name: "valid RunnerPool", obj: builder.NewRunnerPool("ok", ns).Build()},
		{
			name: "valid RunnerPool with annotations for its runners",
			obj: func() *fleetv1.RunnerPool {
				p := builder.NewRunnerPool("annotated", ns).Build()
				p.Spec.Template.ObjectMeta.Annotations = map[string]string{"example.com/team": "ci", "cluster.x-k8s.io/exclude-node-draining": ""}
				return p
			}(),
		},
		{
			name: "RunnerPool annotation under HyperFleet's own prefix",
			obj: func() *fleetv1.RunnerPool {
				p := builder.NewRunnerPool("reserved", ns).Build()
				p.Spec.Template.ObjectMeta.Annotations = map[string]string{"example.com/team": "ci", "infrastructure.cluster.x-k8s.io/warm": "held"}
				return p
			}(),
			message: "template.metadata.annotations cannot use HyperFleet's own prefixes",
		},
		{
			name:    "RunnerPool min above max",
			obj:     builder.NewRunnerPool("minmax", ns).WithBounds(5, 2).Build(),
			message: "minReplicas must not be greater than maxReplicas",
		},
		{
			name:    "RunnerPool idle above max",
			obj:     builder.NewRunnerPool("idle", ns).WithBounds(0, 2).WithIdle(3).Build(),
			message: "idleReplicas must not be greater than maxReplicas",
		},
		{name: "valid RunnerPool with a warm tier", obj: builder.NewRunnerPool("warm", ns).WithBounds(0, 4).WithIdle(2).WithWarm(2, time.Hour).Build()},
		{
			name:    "RunnerPool warm above max",
			obj:     builder.NewRunnerPool("warmmax", ns).WithBounds(0, 2).WithWarm(3, 0).Build(),
			message: "warmReplicas must not be greater than maxReplicas",
		},
		{
			name:    "RunnerPool idle plus warm above max",
			obj:     builder.NewRunnerPool("idlewarm", ns).WithBounds(0, 3).WithIdle(2).WithWarm(2, 0).Build(),
			message: "idleReplicas plus warmReplicas must not be greater than maxReplicas",
		},
		{
			name:    "RunnerPool warmMaxAge too long",
			obj:     builder.NewRunnerPool("warmage", ns).WithBounds(0, 3).WithWarm(1, 200*time.Hour).Build(),
			message: "warmMaxAge must be at least 1s and at most 168h",
		},
		{
			name:    "RunnerPool replicas outside bounds",
			obj:     builder.NewRunnerPool("replicas", ns).WithBounds(1, 3).WithReplicas(7).Build(),
			message: "replicas must lie between minReplicas and maxReplicas",
		},
		{
			name: "RunnerPool without organization or repository",
			obj: builder.NewRunnerPool("scope", ns).WithGitHub(fleetv1.GitHubSpec{
				Labels: []string{"linux"}, CredentialsRef: fleetv1.LocalObjectReference{Name: "app"}}).Build(),
			message: "set github.organization or github.repository",
		},
		{
			name: "RunnerPool malformed repository",
			obj: builder.NewRunnerPool("repo", ns).WithGitHub(fleetv1.GitHubSpec{
				Repository: "not-a-repo", Labels: []string{"linux"}, CredentialsRef: fleetv1.LocalObjectReference{Name: "app"}}).Build(),
			message: "spec.platform.github.repository",
		},
		{
			name: "RunnerPool polling too often",
			obj: builder.NewRunnerPool("pollfast", ns).WithGitHub(fleetv1.GitHubSpec{
				Organization: "acme", Labels: []string{"linux"}, CredentialsRef: fleetv1.LocalObjectReference{Name: "app"},
				Demand: fleetv1.GitHubDemandPolling, PollInterval: &metav1.Duration{Duration: time.Second}}).Build(),
			message: "pollInterval must be between 10s and 10m",
		},
		{
			name: "RunnerPool with a poll interval but webhook demand",
			obj: builder.NewRunnerPool("pollwebhook", ns).WithGitHub(fleetv1.GitHubSpec{
				Organization: "acme", Labels: []string{"linux"}, CredentialsRef: fleetv1.LocalObjectReference{Name: "app"},
				PollInterval: &metav1.Duration{Duration: time.Minute}}).Build(),
			message: "pollInterval needs demand: Polling or Both",
		},
		{
			name: "valid RunnerPool polling and receiving webhooks",
			obj: builder.NewRunnerPool("pollboth", ns).WithGitHub(fleetv1.GitHubSpec{
				Organization: "acme", Labels: []string{"linux"}, CredentialsRef: fleetv1.LocalObjectReference{Name: "app"},
				Demand: fleetv1.GitHubDemandBoth, PollInterval: &metav1.Duration{Duration: 15 * time.Second}}).Build(),
		},
		{
			name: "RunnerPool with an unknown demand source",
			obj: builder.NewRunnerPool("pollbad", ns).WithGitHub(fleetv1.GitHubSpec{
				Organization: "acme", Labels: []string{"linux"}, CredentialsRef: fleetv1.LocalObjectReference{Name: "app"},
				Demand: "Carrier-Pigeon"}).Build(),
			message: "spec.platform.github.demand",
		},
		{
			name:    "RunnerPool without labels",
			obj:     builder.NewRunnerPool("nolabels", ns).WithLabels().Build(),
			message: "spec.platform.github.labels",
		},
		{
			name:    "RunnerPool without a platform",
			obj:     withPlatform(builder.NewRunnerPool("noplatform", ns).Build(), fleetv1.PlatformSpec{}),
			message: "set exactly one of platform.github, platform.gitlab or platform.buildkite",
		},
		{
			name: "RunnerPool with two platforms",
			obj: withPlatform(builder.NewRunnerPool("twoplatforms", ns).Build(), fleetv1.PlatformSpec{
				GitHub: &fleetv1.GitHubSpec{Organization: "acme", Labels: []string{"linux"}, CredentialsRef: fleetv1.LocalObjectReference{Name: "app"}},
				GitLab: validGitLab()}),
			message: "set exactly one of platform.github, platform.gitlab or platform.buildkite",
		},
		{name: "valid GitLab RunnerPool", obj: builder.NewRunnerPool("gitlab", ns).WithGitLab(*validGitLab()).Build()},
		{
			name: "GitLab RunnerPool with two scopes",
			obj: builder.NewRunnerPool("glscopes", ns).WithGitLab(func() fleetv1.GitLabSpec {
				s := *validGitLab()
				s.Scope.Instance = true
				return s
			}()).Build(),
			message: "set exactly one of scope.instance: true, scope.group or scope.project",
		},
		{
			name: "GitLab RunnerPool over plain HTTP",
			obj: builder.NewRunnerPool("glhttp", ns).WithGitLab(func() fleetv1.GitLabSpec {
				s := *validGitLab()
				s.URL = "http://gitlab.lab"
				return s
			}()).Build(),
			message: "url is http://",
		},
		{
			name: "GitLab RunnerPool that takes no job",
			obj: builder.NewRunnerPool("glnotags", ns).WithGitLab(func() fleetv1.GitLabSpec {
				s := *validGitLab()
				s.Tags = nil
				return s
			}()).Build(),
			message: "set tags, runUntagged: true, or both",
		},
		{name: "valid Buildkite RunnerPool", obj: builder.NewRunnerPool("buildkite", ns).WithBuildkite(validBuildkite()).Build()},
		{
			name: "Buildkite RunnerPool with a cluster that is no UUID",
			obj: builder.NewRunnerPool("bkcluster", ns).WithBuildkite(func() fleetv1.BuildkiteSpec {
				s := validBuildkite()
				s.Cluster = "default"
				return s
			}()).Build(),
			message: "spec.platform.buildkite.cluster",
		},
		{
			name: "Buildkite RunnerPool agents over plain HTTP",
			obj: builder.NewRunnerPool("bkhttp", ns).WithBuildkite(func() fleetv1.BuildkiteSpec {
				s := validBuildkite()
				s.AgentEndpoint = "http://agent.lab/v3"
				return s
			}()).Build(),
			message: "agentEndpoint is http://",
		},
		{name: "valid BootstrapConfig", obj: builder.NewBootstrapConfig("ok", ns).Build()},
		{name: "valid BootstrapConfig for arm64 Linux", obj: builder.NewBootstrapConfig("arm", ns).WithRunner(bootstrapv1.RunnerSpec{OS: "linux", Arch: "arm64"}).Build()},
		{
			name:    "BootstrapConfig for a Windows runner",
			obj:     builder.NewBootstrapConfig("windows", ns).WithRunner(bootstrapv1.RunnerSpec{OS: "windows"}).Build(),
			message: `spec.runner.os: Unsupported value: "windows"`,
		},
		{
			name: "BootstrapConfig SPIRE without server",
			obj: builder.NewBootstrapConfig("spire", ns).WithAttestation(bootstrapv1.AttestationSpec{
				Provider: bootstrapv1.IdentitySPIRE}).Build(),
			message: "provider SPIRE needs spireServerAddress",
		},
		{
			name: "BootstrapConfig SPIRE with TPM",
			obj: builder.NewBootstrapConfig("spiretpm", ns).WithAttestation(bootstrapv1.AttestationSpec{
				Provider: bootstrapv1.IdentitySPIRE, Method: bootstrapv1.AttestationTPM, SPIREServerAddress: "spire-server.spire:8081"}).Build(),
			message: "method TPM works with provider Builtin only",
		},
		{
			name: "valid BootstrapConfig with Builtin TPM attestation",
			obj: builder.NewBootstrapConfig("tpm", ns).WithAttestation(bootstrapv1.AttestationSpec{
				Provider: bootstrapv1.IdentityBuiltin, Method: bootstrapv1.AttestationTPM}).Build(),
		},
		{
			name:    "BootstrapConfig plain-http bootstrap service",
			obj:     builder.NewBootstrapConfig("http", ns).WithServiceURL("http://bootstrap:8443").Build(),
			message: "bootstrapServiceURL must be an https:// URL",
		},
		{
			name: "BootstrapConfig join token good for a week",
			obj: builder.NewBootstrapConfig("ttl", ns).WithAttestation(bootstrapv1.AttestationSpec{
				JoinTokenTTL: &metav1.Duration{Duration: 7 * 24 * time.Hour}}).Build(),
			message: "joinTokenTTL must be more than 0s and at most 24h",
		},
		{
			name: "BootstrapConfig join token that never works",
			obj: builder.NewBootstrapConfig("ttl0", ns).WithAttestation(bootstrapv1.AttestationSpec{
				JoinTokenTTL: &metav1.Duration{Duration: -time.Minute}}).Build(),
			message: "joinTokenTTL must be more than 0s and at most 24h",
		},
		{
			name: "valid BootstrapConfig with a day-long join token",
			obj: builder.NewBootstrapConfig("ttl24", ns).WithAttestation(bootstrapv1.AttestationSpec{
				JoinTokenTTL: &metav1.Duration{Duration: 24 * time.Hour}}).Build(),
		},
		{
			name: "BootstrapConfig bad runner checksum",
			obj: builder.NewBootstrapConfig("sha", ns).WithRunner(bootstrapv1.RunnerSpec{
				DownloadURL: "https://example.com/runner.tgz", SHA256: "xyz"}).Build(),
			message: "spec.runner.sha256",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(context.Background(), tc.obj, client.DryRunAll)
			if tc.message == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}
}

// TestImmutableFields proves the transition rules.
func TestImmutableFields(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "immutable")

	t.Run("RunnerPool clusterName", func(t *testing.T) {
		g := NewWithT(t)
		pool := builder.NewRunnerPool("pool", ns).Build()
		g.Expect(env.Client.Create(ctx, pool)).To(Succeed())
		pool.Spec.ClusterName = "other"
		err := env.Client.Update(ctx, pool)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("clusterName is immutable"))
	})

	t.Run("HypervisorCluster provider", func(t *testing.T) {
		g := NewWithT(t)
		hc := builder.NewHypervisorCluster("pve", ns).Build()
		g.Expect(env.Client.Create(ctx, hc)).To(Succeed())
		hc.Spec.Provider = infrav1.ProviderHyperV
		err := env.Client.Update(ctx, hc)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("provider cannot change"))
	})

	t.Run("MachineClaim providerID", func(t *testing.T) {
		g := NewWithT(t)
		claim := builder.NewMachineClaim("claim", ns).Build()
		g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
		claim.Spec.ProviderID = "hyperfleet://uid/pve1/100"
		g.Expect(env.Client.Update(ctx, claim)).To(Succeed(), "setting providerID the first time is allowed")
		claim.Spec.ProviderID = "hyperfleet://uid/pve2/101"
		err := env.Client.Update(ctx, claim)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("providerID cannot be changed once set"))
	})
}

// withProvider sets a HypervisorCluster's provider and provider-specific settings.
func withProvider(hc *infrav1.HypervisorCluster, kind infrav1.ProviderType, px *infrav1.ProxmoxClusterParameters,
	hv *infrav1.HyperVClusterParameters) *infrav1.HypervisorCluster {
	hc.Spec.Provider, hc.Spec.Proxmox, hc.Spec.HyperV = kind, px, hv
	return hc
}

// TestCRDContractLabels checks what Cluster API needs to find HyperFleet's kinds.
func TestCRDContractLabels(t *testing.T) {
	g := NewWithT(t)
	for _, name := range []string{
		"hypervisorclusters.infrastructure.cluster.x-k8s.io",
		"hypervisorclustertemplates.infrastructure.cluster.x-k8s.io",
		"machineclaims.infrastructure.cluster.x-k8s.io",
		"machineclaimtemplates.infrastructure.cluster.x-k8s.io",
		"bootstrapconfigs.bootstrap.cluster.x-k8s.io",
		"bootstrapconfigtemplates.bootstrap.cluster.x-k8s.io",
	} {
		crd := &metav1.PartialObjectMetadata{}
		crd.SetGroupVersionKind(apiextensionsCRD)
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: name}, crd)).To(Succeed(), name)
		g.Expect(crd.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta2", "v1alpha1"), name)
		g.Expect(crd.Labels).To(HaveKeyWithValue("cluster.x-k8s.io/v1beta1", "v1alpha1"), name)
	}
}

func withPlatform(p *fleetv1.RunnerPool, spec fleetv1.PlatformSpec) *fleetv1.RunnerPool {
	p.Spec.Platform = spec
	return p
}

func validGitLab() *fleetv1.GitLabSpec {
	return &fleetv1.GitLabSpec{URL: "https://gitlab.example.com", Scope: fleetv1.GitLabScope{Group: "platform/ci"},
		Tags: []string{"linux"}, CredentialsRef: fleetv1.LocalObjectReference{Name: "gitlab-token"}}
}

func validBuildkite() fleetv1.BuildkiteSpec {
	return fleetv1.BuildkiteSpec{Organization: "acme", Cluster: "0190b3a8-0c4f-4c5e-9a8e-2f7d5b0c1e11", Queue: "default",
		Tags: []string{"os=linux"}, CredentialsRef: fleetv1.LocalObjectReference{Name: "buildkite-token"}}
}
