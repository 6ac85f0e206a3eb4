package builder

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// HypervisorClusterBuilder builds HypervisorClusters.
type HypervisorClusterBuilder struct{ obj *infrav1.HypervisorCluster }

// NewHypervisorCluster starts a valid HypervisorCluster with token credentials in Secret "<name>-credentials".
func NewHypervisorCluster(name, namespace string) *HypervisorClusterBuilder {
	return &HypervisorClusterBuilder{obj: &infrav1.HypervisorCluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: infrav1.HypervisorClusterSpec{
			Provider:       infrav1.ProviderProxmox,
			Endpoint:       "https://127.0.0.1:8006",
			CredentialsRef: infrav1.LocalSecretReference{Name: name + "-credentials"},
		},
	}}
}

func (b *HypervisorClusterBuilder) WithEndpoint(url string) *HypervisorClusterBuilder {
	b.obj.Spec.Endpoint = url
	return b
}

func (b *HypervisorClusterBuilder) WithCredentials(secret string) *HypervisorClusterBuilder {
	b.obj.Spec.CredentialsRef.Name = secret
	return b
}

func (b *HypervisorClusterBuilder) WithCABundle(secret, key string) *HypervisorClusterBuilder {
	b.obj.Spec.CABundleRef = &infrav1.SecretKeyReference{Name: secret, Key: key}
	return b
}

func (b *HypervisorClusterBuilder) WithInsecure() *HypervisorClusterBuilder {
	b.obj.Spec.InsecureSkipTLSVerify = true
	return b
}

func (b *HypervisorClusterBuilder) WithAllowedNodes(nodes ...string) *HypervisorClusterBuilder {
	b.obj.Spec.AllowedNodes = nodes
	return b
}

func (b *HypervisorClusterBuilder) WithProxmox(p infrav1.ProxmoxClusterParameters) *HypervisorClusterBuilder {
	b.obj.Spec.Proxmox = &p
	return b
}

// WithHyperV makes the cluster a set of Hyper-V hosts with the given settings.
func (b *HypervisorClusterBuilder) WithHyperV(p infrav1.HyperVClusterParameters) *HypervisorClusterBuilder {
	b.obj.Spec.Provider, b.obj.Spec.HyperV = infrav1.ProviderHyperV, &p
	return b
}

func (b *HypervisorClusterBuilder) WithVSphere(p infrav1.VSphereClusterParameters) *HypervisorClusterBuilder {
	b.obj.Spec.Provider, b.obj.Spec.VSphere = infrav1.ProviderVSphere, &p
	return b
}

func (b *HypervisorClusterBuilder) WithHealthCheckInterval(d metav1.Duration) *HypervisorClusterBuilder {
	b.obj.Spec.HealthCheckInterval = &d
	return b
}

func (b *HypervisorClusterBuilder) WithLabels(labels map[string]string) *HypervisorClusterBuilder {
	b.obj.Labels = labels
	return b
}

func (b *HypervisorClusterBuilder) Build() *infrav1.HypervisorCluster { return b.obj.DeepCopy() }

// MachineClaimBuilder builds MachineClaims.
type MachineClaimBuilder struct{ obj *infrav1.MachineClaim }

// NewMachineClaim starts a valid MachineClaim cloning template 9000.
func NewMachineClaim(name, namespace string) *MachineClaimBuilder {
	return &MachineClaimBuilder{obj: &infrav1.MachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       infrav1.MachineClaimSpec{Template: infrav1.TemplateSource{ID: "9000"}},
	}}
}

func (b *MachineClaimBuilder) WithTemplate(t infrav1.TemplateSource) *MachineClaimBuilder {
	b.obj.Spec.Template = t
	return b
}

func (b *MachineClaimBuilder) WithTemplateName(name string, tags ...string) *MachineClaimBuilder {
	b.obj.Spec.Template = infrav1.TemplateSource{Name: name, Tags: tags}
	return b
}

// WithPersistent makes the claim a long-lived VM with the given run strategy.
func (b *MachineClaimBuilder) WithPersistent(strategy infrav1.RunStrategy) *MachineClaimBuilder {
	b.obj.Spec.Lifecycle, b.obj.Spec.RunStrategy = infrav1.LifecyclePersistent, strategy
	return b
}

// WithHooks sets the preStart and preStop commands (nil for none).
func (b *MachineClaimBuilder) WithHooks(preStart, preStop []string) *MachineClaimBuilder {
	h := &infrav1.LifecycleHooks{}
	if preStart != nil {
		h.PreStart = &infrav1.LifecycleHook{Command: preStart, TimeoutSeconds: 30}
	}
	if preStop != nil {
		h.PreStop = &infrav1.LifecycleHook{Command: preStop, TimeoutSeconds: 30}
	}
	b.obj.Spec.Hooks = h
	return b
}

// WithTerminationGracePeriod sets how long a stopping guest gets before it is powered off.
func (b *MachineClaimBuilder) WithTerminationGracePeriod(seconds int32) *MachineClaimBuilder {
	b.obj.Spec.TerminationGracePeriodSeconds = ptr.To(seconds)
	return b
}

func (b *MachineClaimBuilder) WithHypervisorCluster(name string) *MachineClaimBuilder {
	b.obj.Spec.HypervisorClusterName = name
	return b
}

func (b *MachineClaimBuilder) WithBootstrapSecret(name string) *MachineClaimBuilder {
	b.obj.Spec.Bootstrap = &infrav1.BootstrapSpec{DataSecretName: ptr.To(name)}
	return b
}

func (b *MachineClaimBuilder) WithResources(cores, memoryMiB int32) *MachineClaimBuilder {
	b.obj.Spec.Cores, b.obj.Spec.MemoryMiB = cores, memoryMiB
	return b
}

func (b *MachineClaimBuilder) WithDiskGiB(size int32) *MachineClaimBuilder {
	b.obj.Spec.DiskSizeGiB = size
	return b
}

func (b *MachineClaimBuilder) WithClone(mode infrav1.CloneMode, storage string) *MachineClaimBuilder {
	b.obj.Spec.CloneMode = mode
	if storage != "" {
		if b.obj.Spec.Proxmox == nil {
			b.obj.Spec.Proxmox = &infrav1.ProxmoxMachineParameters{}
		}
		b.obj.Spec.Proxmox.Storage = storage
	}
	return b
}

func (b *MachineClaimBuilder) WithNetwork(name string, vlan int32) *MachineClaimBuilder {
	n := &infrav1.NetworkSpec{Name: name}
	if vlan != 0 {
		n.VLAN = ptr.To(vlan)
	}
	b.obj.Spec.Network = n
	return b
}

func (b *MachineClaimBuilder) WithTags(tags ...string) *MachineClaimBuilder {
	b.obj.Spec.Tags = tags
	return b
}

func (b *MachineClaimBuilder) WithUserData(userData string) *MachineClaimBuilder {
	b.obj.Spec.CloudInit = &infrav1.CloudInitSpec{UserData: userData}
	return b
}

func (b *MachineClaimBuilder) WithFailureDomain(fd string) *MachineClaimBuilder {
	b.obj.Spec.FailureDomain = fd
	return b
}

func (b *MachineClaimBuilder) WithLabels(labels map[string]string) *MachineClaimBuilder {
	b.obj.Labels = labels
	return b
}

// WithAnnotation sets one annotation.
func (b *MachineClaimBuilder) WithAnnotation(key, value string) *MachineClaimBuilder {
	if b.obj.Annotations == nil {
		b.obj.Annotations = map[string]string{}
	}
	b.obj.Annotations[key] = value
	return b
}

func (b *MachineClaimBuilder) WithOwner(ref metav1.OwnerReference) *MachineClaimBuilder {
	b.obj.OwnerReferences = append(b.obj.OwnerReferences, ref)
	return b
}

// WithPlacement sets a persistent claim's placement rules.
func (b *MachineClaimBuilder) WithPlacement(p infrav1.PlacementSpec) *MachineClaimBuilder {
	b.obj.Spec.Placement = &p
	return b
}

func (b *MachineClaimBuilder) Build() *infrav1.MachineClaim { return b.obj.DeepCopy() }

// MachineClaimTemplateBuilder builds MachineClaimTemplates.
type MachineClaimTemplateBuilder struct{ obj *infrav1.MachineClaimTemplate }

// NewMachineClaimTemplate starts a valid MachineClaimTemplate whose claims clone template VMID 9000.
func NewMachineClaimTemplate(name, namespace string) *MachineClaimTemplateBuilder {
	return &MachineClaimTemplateBuilder{obj: &infrav1.MachineClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: infrav1.MachineClaimTemplateSpec{Template: infrav1.MachineClaimTemplateResource{
			Spec: infrav1.MachineClaimSpec{Template: infrav1.TemplateSource{ID: "9000"}},
		}},
	}}
}

func (b *MachineClaimTemplateBuilder) WithSpec(spec infrav1.MachineClaimSpec) *MachineClaimTemplateBuilder {
	b.obj.Spec.Template.Spec = spec
	return b
}

func (b *MachineClaimTemplateBuilder) Build() *infrav1.MachineClaimTemplate { return b.obj.DeepCopy() }
