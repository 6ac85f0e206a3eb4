package builder

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

// RunnerPoolBuilder builds RunnerPools.
type RunnerPoolBuilder struct{ obj *fleetv1.RunnerPool }

// NewRunnerPool starts a valid RunnerPool of at most 5 runners for organization "acme".
func NewRunnerPool(name, namespace string) *RunnerPoolBuilder {
	return &RunnerPoolBuilder{obj: &fleetv1.RunnerPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: fleetv1.RunnerPoolSpec{
			ClusterName: "runners",
			MaxReplicas: 5,
			GitHub: fleetv1.GitHubSpec{
				Organization:   "acme",
				Labels:         []string{"linux"},
				CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"},
			},
			Template: fleetv1.RunnerMachineTemplate{
				InfrastructureRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: "infrastructure.cluster.x-k8s.io", Kind: "MachineClaimTemplate", Name: "runner"},
				BootstrapConfigRef: clusterv1.ContractVersionedObjectReference{
					APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "BootstrapConfigTemplate", Name: "runner"},
			},
		},
	}}
}

func (b *RunnerPoolBuilder) WithCluster(name string) *RunnerPoolBuilder {
	b.obj.Spec.ClusterName = name
	return b
}

func (b *RunnerPoolBuilder) WithBounds(min, max int32) *RunnerPoolBuilder {
	b.obj.Spec.MinReplicas, b.obj.Spec.MaxReplicas = min, max
	return b
}

func (b *RunnerPoolBuilder) WithIdle(idle int32) *RunnerPoolBuilder {
	b.obj.Spec.IdleReplicas = idle
	return b
}

func (b *RunnerPoolBuilder) WithReplicas(n int32) *RunnerPoolBuilder {
	b.obj.Spec.Replicas = ptr.To(n)
	return b
}

func (b *RunnerPoolBuilder) WithGitHub(gh fleetv1.GitHubSpec) *RunnerPoolBuilder {
	b.obj.Spec.GitHub = gh
	return b
}

func (b *RunnerPoolBuilder) WithLabels(labels ...string) *RunnerPoolBuilder {
	b.obj.Spec.GitHub.Labels = labels
	return b
}

func (b *RunnerPoolBuilder) WithTemplates(machineClaimTemplate, bootstrapConfigTemplate string) *RunnerPoolBuilder {
	b.obj.Spec.Template.InfrastructureRef.Name = machineClaimTemplate
	b.obj.Spec.Template.BootstrapConfigRef.Name = bootstrapConfigTemplate
	return b
}

func (b *RunnerPoolBuilder) Build() *fleetv1.RunnerPool { return b.obj.DeepCopy() }

// BootstrapConfigBuilder builds BootstrapConfigs.
type BootstrapConfigBuilder struct{ obj *bootstrapv1.BootstrapConfig }

// NewBootstrapConfig starts a valid BootstrapConfig with the defaults (join token, builtin identity).
func NewBootstrapConfig(name, namespace string) *BootstrapConfigBuilder {
	return &BootstrapConfigBuilder{obj: &bootstrapv1.BootstrapConfig{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
	}}
}

func (b *BootstrapConfigBuilder) WithAttestation(a bootstrapv1.AttestationSpec) *BootstrapConfigBuilder {
	b.obj.Spec.Attestation = a
	return b
}

func (b *BootstrapConfigBuilder) WithRunner(r bootstrapv1.RunnerSpec) *BootstrapConfigBuilder {
	b.obj.Spec.Runner = r
	return b
}

func (b *BootstrapConfigBuilder) WithServiceURL(url string) *BootstrapConfigBuilder {
	b.obj.Spec.BootstrapServiceURL = url
	return b
}

func (b *BootstrapConfigBuilder) Build() *bootstrapv1.BootstrapConfig { return b.obj.DeepCopy() }
