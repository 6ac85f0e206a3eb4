package v1alpha1

// ProviderType names the hypervisor behind a HypervisorCluster.
// +kubebuilder:validation:Enum=Proxmox;hyperv;vsphere
type ProviderType string

const (
	// ProviderProxmox is Proxmox VE 8 or 9.
	ProviderProxmox ProviderType = "Proxmox"
	// ProviderHyperV is a set of Hyper-V hosts (Windows Server 2019 or later) reached over WinRM.
	ProviderHyperV ProviderType = "hyperv"
	// ProviderVSphere is a VMware vCenter's compute cluster, reached over vCenter's SOAP API.
	ProviderVSphere ProviderType = "vsphere"
)

// CloneMode chooses how a VM is copied from its template. Both providers make linked clones:
// Proxmox VE a linked clone, Hyper-V a differencing disk on the template's VHDX.
// +kubebuilder:validation:Enum=Linked;Full
type CloneMode string

const (
	// CloneLinked shares the template's disks copy-on-write: fast and small, the default.
	CloneLinked CloneMode = "Linked"
	// CloneFull copies the disks, optionally to another storage.
	CloneFull CloneMode = "Full"
)

// CloudInitDelivery chooses how cloud-init data reaches a VM. Each VM has exactly one data source.
// +kubebuilder:validation:Enum=ISO;Snippets
type CloudInitDelivery string

const (
	// CloudInitISO builds a NoCloud ISO in-process and uploads it to the cluster's ISO storage.
	CloudInitISO CloudInitDelivery = "ISO"
	// CloudInitSnippets writes user-data to a snippets-enabled storage and points cicustom at it.
	CloudInitSnippets CloudInitDelivery = "Snippets"
)

// SecretKeyReference points at one key of a Secret in the referencing object's namespace.
type SecretKeyReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// key in the Secret's data.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// LocalSecretReference names a Secret in the referencing object's namespace.
type LocalSecretReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
}
