package builder

import (
	"time"

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
			Platform: fleetv1.PlatformSpec{GitHub: &fleetv1.GitHubSpec{
				Organization:   "acme",
				Labels:         []string{"linux"},
				CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"},
			}},
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

// WithWarm sets the warm tier: warm VMs kept and their maximum age (none: the default).
func (b *RunnerPoolBuilder) WithWarm(warm int32, maxAge time.Duration) *RunnerPoolBuilder {
	b.obj.Spec.WarmReplicas = warm
	if maxAge != 0 {
		b.obj.Spec.WarmMaxAge = &metav1.Duration{Duration: maxAge}
	}
	return b
}

func (b *RunnerPoolBuilder) WithReplicas(n int32) *RunnerPoolBuilder {
	b.obj.Spec.Replicas = ptr.To(n)
	return b
}

// WithGitHub makes the pool a GitHub pool with gh.
func (b *RunnerPoolBuilder) WithGitHub(gh fleetv1.GitHubSpec) *RunnerPoolBuilder {
	b.obj.Spec.Platform = fleetv1.PlatformSpec{GitHub: &gh}
	return b
}

// WithGitLab makes the pool a GitLab pool with gl.
func (b *RunnerPoolBuilder) WithGitLab(gl fleetv1.GitLabSpec) *RunnerPoolBuilder {
	b.obj.Spec.Platform = fleetv1.PlatformSpec{GitLab: &gl}
	return b
}

// WithBuildkite makes the pool a Buildkite pool with bk.
func (b *RunnerPoolBuilder) WithBuildkite(bk fleetv1.BuildkiteSpec) *RunnerPoolBuilder {
	b.obj.Spec.Platform = fleetv1.PlatformSpec{Buildkite: &bk}
	return b
}

// WithLabels sets the runners' labels (GitHub labels, GitLab tags, Buildkite tags).
func (b *RunnerPoolBuilder) WithLabels(labels ...string) *RunnerPoolBuilder {
	switch p := b.obj.Spec.Platform; {
	case p.GitHub != nil:
		p.GitHub.Labels = labels
	case p.GitLab != nil:
		p.GitLab.Tags = labels
	case p.Buildkite != nil:
		p.Buildkite.Tags = labels
	}
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

// WithTargets makes the pool draw from targets instead of template.infrastructureRef.
func (b *RunnerPoolBuilder) WithTargets(targets ...fleetv1.RunnerTarget) *RunnerPoolBuilder {
	b.obj.Spec.Template.InfrastructureRef = clusterv1.ContractVersionedObjectReference{}
	b.obj.Spec.Template.Targets = targets
	return b
}

// NewMachineSnapshot is a MachineSnapshot of the MachineClaim claim.
func NewMachineSnapshot(name, ns, claim string) *fleetv1.MachineSnapshot {
	return &fleetv1.MachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleetv1.MachineSnapshotSpec{Source: fleetv1.MachineSnapshotSource{MachineClaimName: claim}}}
}

// NewMachineSnapshotRestore restores the MachineClaim claim to its MachineSnapshot snapshot.
func NewMachineSnapshotRestore(name, ns, claim, snapshot string) *fleetv1.MachineSnapshotRestore {
	return &fleetv1.MachineSnapshotRestore{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleetv1.MachineSnapshotRestoreSpec{Target: fleetv1.MachineSnapshotSource{MachineClaimName: claim}, MachineSnapshotName: snapshot}}
}

// NewMachineMigration moves the MachineClaim claim's VM to target ("" lets placement choose).
func NewMachineMigration(name, ns, claim, target string) *fleetv1.MachineMigration {
	return &fleetv1.MachineMigration{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleetv1.MachineMigrationSpec{MachineClaimName: claim, Target: target}}
}
