package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// HypervisorClusterFinalizer lets HyperFleet release the cluster's VMs before the object goes away.
const HypervisorClusterFinalizer = "hypervisorcluster.infrastructure.cluster.x-k8s.io"

// HypervisorClusterSpec describes how to reach one hypervisor cluster.
// +kubebuilder:validation:XValidation:rule="!has(self.insecureSkipTLSVerify) || !self.insecureSkipTLSVerify || !has(self.caBundleRef)",message="set either caBundleRef or insecureSkipTLSVerify, not both"
// +kubebuilder:validation:XValidation:rule="!self.endpoint.startsWith('http://') || (has(self.allowInsecureHTTP) && self.allowInsecureHTTP)",message="endpoint is http://: the API token would travel in clear text; use https:// or, for a lab, set allowInsecureHTTP: true"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.installationID) || (has(self.installationID) && self.installationID == oldSelf.installationID)",message="installationID cannot be changed or removed once set: every VM HyperFleet made on this cluster carries it"
// +kubebuilder:validation:XValidation:rule="!has(self.proxmox) || !has(self.provider) || self.provider == 'Proxmox'",message="spec.proxmox applies only to provider Proxmox: remove it, or set provider: Proxmox"
// +kubebuilder:validation:XValidation:rule="!has(self.hyperv) || (has(self.provider) && self.provider == 'hyperv')",message="spec.hyperv applies only to provider hyperv: remove it, or set provider: hyperv"
// +kubebuilder:validation:XValidation:rule="!has(self.vsphere) || (has(self.provider) && self.provider == 'vsphere')",message="spec.vsphere applies only to provider vsphere: remove it, or set provider: vsphere"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.provider) || (has(self.provider) && self.provider == oldSelf.provider)",message="provider cannot change: every VM of this cluster belongs to its provider; create another HypervisorCluster"
type HypervisorClusterSpec struct {
	// installationID identifies this HypervisorCluster's installation of HyperFleet on the
	// hypervisor. HyperFleet generates it at random on first reconcile; together with the
	// object's namespace and name it is stamped on every VM it creates (tags and description),
	// so two installations sharing one Proxmox VE cluster never take each other's VMs, even with
	// identically named objects. It lives in spec so that clusterctl move and backups carry it;
	// it cannot change once set. Set it only to restore a HypervisorCluster from a backup.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-z0-9]{8,32}$`
	InstallationID string `json:"installationID,omitempty"`

	// controlPlaneEndpoint is reported to Cluster API. Runner fleets have no workload control plane;
	// HyperFleet fills it with the hypervisor API's host when left empty.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// provider is the kind of hypervisor: Proxmox (Proxmox VE), hyperv (Hyper-V over WinRM) or
	// vsphere (a VMware vCenter). Its settings go in the sub-struct of the same name, spec.proxmox,
	// spec.hyperv or spec.vsphere.
	// +optional
	// +kubebuilder:default=Proxmox
	Provider ProviderType `json:"provider,omitempty"`

	// endpoint is the URL of the hypervisor's API, e.g. https://pve.example.com:8006 (Proxmox),
	// https://hv1.example.com:5986/wsman (Hyper-V; with spec.hyperv.hosts, the first host's) or
	// https://vcenter.example.com (vSphere; the SDK path /sdk is added).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="endpoint must be an http:// or https:// URL, e.g. https://pve.example.com:8006"
	Endpoint string `json:"endpoint"`

	// credentialsRef names a Secret in this namespace holding either an API token
	// (keys token_id "user@realm!name" and token_secret, Proxmox only) or a user and password
	// (keys username and password; for Hyper-V "DOMAIN\user" or "user", for vSphere a vCenter
	// SSO user such as "hyperfleet@vsphere.local").
	CredentialsRef LocalSecretReference `json:"credentialsRef"`

	// caBundleRef points at a Secret key with the PEM CA bundle that signs the API's certificate
	// (default key ca.crt). Without it the system roots are used.
	// +optional
	CABundleRef *SecretKeyReference `json:"caBundleRef,omitempty"`

	// insecureSkipTLSVerify turns off TLS verification. The Ready condition says so while it is set.
	// +optional
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty"`

	// allowInsecureHTTP lets endpoint be an http:// URL, over which the credentials travel in clear
	// text. Only for labs: while the endpoint is http:// the InsecureTransport condition is True,
	// and every connection logs a warning and records a Warning Event.
	// +optional
	AllowInsecureHTTP bool `json:"allowInsecureHTTP,omitempty"`

	// allowedNodes restricts placement to these hypervisor nodes; each becomes a failure domain.
	// Empty allows every online node.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:Pattern=`^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$`
	AllowedNodes []string `json:"allowedNodes,omitempty"`

	// hosts declares the hypervisor hosts' labels (for the hostSelectors of persistent VMs) and
	// marks hosts for maintenance. A host in maintenance gets no new VMs and is no migration
	// target. Hosts not listed have no labels and are not in maintenance.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	Hosts []HypervisorHost `json:"hosts,omitempty"`

	// drainPolicy is how a host drain tries again to move a persistent VM whose migration off a
	// host in maintenance failed. Unset: 5 attempts, 30 s after the first failure, the wait
	// doubling up to 10 minutes.
	// +optional
	DrainPolicy *DrainPolicy `json:"drainPolicy,omitempty"`

	// proxmox holds settings that only apply to Proxmox VE.
	// +optional
	Proxmox *ProxmoxClusterParameters `json:"proxmox,omitempty"`

	// hyperv holds settings that only apply to Hyper-V.
	// +optional
	HyperV *HyperVClusterParameters `json:"hyperv,omitempty"`

	// vsphere holds settings that only apply to VMware vSphere: where in the vCenter's inventory
	// the VMs go.
	// +optional
	VSphere *VSphereClusterParameters `json:"vsphere,omitempty"`

	// limits bound the clones and deletes HyperFleet runs at once, per host and per storage;
	// claims beyond them wait their turn (condition reason WaitingForSlot).
	// +optional
	// +kubebuilder:default={}
	Limits HypervisorClusterLimits `json:"limits,omitempty,omitzero"`

	// healthCheckInterval is how often the API is probed and, at the same time, how often stopped
	// VMs are swept. Default 30s.
	// +optional
	HealthCheckInterval *metav1.Duration `json:"healthCheckInterval,omitempty"`
}

// VSphereClusterParameters are VMware vSphere specific settings: the inventory objects, by name or
// inventory path, that HyperFleet's VMs of this cluster use.
type VSphereClusterParameters struct {
	// datacenter is the datacenter's name or inventory path; empty is the vCenter's only
	// datacenter.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Datacenter string `json:"datacenter,omitempty"`

	// computeCluster is the compute cluster whose ESXi hosts run the VMs (its hosts are the
	// HypervisorCluster's nodes); empty is the datacenter's only compute cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	ComputeCluster string `json:"computeCluster,omitempty"`

	// resourcePool is the resource pool new VMs join; empty is the compute cluster's root pool.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	ResourcePool string `json:"resourcePool,omitempty"`

	// folder is the VM folder new VMs are created in; empty is the datacenter's VM folder.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Folder string `json:"folder,omitempty"`

	// datastore holds full clones; empty keeps each clone on its template's datastore. Linked
	// clones always stay beside their template's disks.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Datastore string `json:"datastore,omitempty"`
}

// ProxmoxClusterParameters are Proxmox VE specific settings.
// +kubebuilder:validation:XValidation:rule="!has(self.vmidRange) || self.vmidRange.start <= self.vmidRange.end",message="vmidRange.start must not be greater than vmidRange.end"
// +kubebuilder:validation:XValidation:rule="!has(self.cloudInitDelivery) || self.cloudInitDelivery == 'ISO'",message="cloudInitDelivery Snippets is not supported: Proxmox VE's API cannot upload snippets, so HyperFleet delivers cloud-init data on a NoCloud ISO; leave cloudInitDelivery unset or ISO"
// +kubebuilder:validation:XValidation:rule="!has(self.snippetsStorage)",message="snippetsStorage is not used: HyperFleet delivers cloud-init data on a NoCloud ISO written to isoStorage; remove snippetsStorage"
type ProxmoxClusterParameters struct {
	// isoStorage is the storage that receives NoCloud cloud-init ISOs. Default local.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-zA-Z][a-zA-Z0-9\-_.]*$`
	ISOStorage string `json:"isoStorage,omitempty"`

	// snippetsStorage is refused: snippets cannot be uploaded through Proxmox VE's API. Kept so
	// that objects naming it are refused with a reason rather than pruned.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-zA-Z][a-zA-Z0-9\-_.]*$`
	SnippetsStorage string `json:"snippetsStorage,omitempty"`

	// cloudInitDelivery chooses the cloud-init data source of the VMs: ISO (the default and the
	// only one supported; Snippets is refused at admission).
	// +optional
	CloudInitDelivery CloudInitDelivery `json:"cloudInitDelivery,omitempty"`

	// vmidRange confines the VMIDs HyperFleet allocates, so several installations can share one
	// Proxmox cluster without colliding.
	// +optional
	VMIDRange *VMIDRange `json:"vmidRange,omitempty"`

	// pool is the Proxmox resource pool new VMs join.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Pool string `json:"pool,omitempty"`
}

// HyperVAuth is how HyperFleet authenticates to a Hyper-V host's WinRM listener.
// +kubebuilder:validation:Enum=basic;ntlm
type HyperVAuth string

const (
	// HyperVAuthBasic sends the user and password with every request; only over HTTPS.
	HyperVAuthBasic HyperVAuth = "basic"
	// HyperVAuthNTLM is NTLM challenge-response, for local and domain accounts.
	HyperVAuthNTLM HyperVAuth = "ntlm"
)

// HyperVHost is one Hyper-V host: a standalone host or a failover cluster's node.
type HyperVHost struct {
	// name is the node name HyperFleet uses for the host (placement, failure domains, VM refs).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9.-]{0,61}[A-Za-z0-9])?$`
	Name string `json:"name"`

	// endpoint is the host's WinRM URL, e.g. https://hv1.example.com:5986/wsman.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="endpoint must be an http:// or https:// URL, e.g. https://hv1.example.com:5986/wsman"
	Endpoint string `json:"endpoint"`
}

// HyperVClusterParameters are Hyper-V specific settings. Paths are absolute Windows paths (local
// or UNC) on the hosts; empty ones take the defaults under C:\ProgramData\HyperFleet. A path
// holds no quote, typographic ones included, and no control character: HyperFleet names these
// folders in the PowerShell it runs on the hosts.
// +kubebuilder:validation:XValidation:rule="!has(self.hosts) || self.hosts.all(h, self.hosts.exists_one(o, o.name == h.name))",message="hosts must have distinct names"
type HyperVClusterParameters struct {
	// hosts are the cluster's Hyper-V hosts, each with its own WinRM listener. Empty means one
	// host: spec.endpoint, named after its host name.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Hosts []HyperVHost `json:"hosts,omitempty"`

	// auth is how HyperFleet signs in to WinRM: ntlm (default) or basic.
	// +optional
	Auth HyperVAuth `json:"auth,omitempty"`

	// failoverCluster is refused: HyperFleet does not yet make its VMs failover-cluster roles
	// (highly available VMs). List the cluster's nodes in hosts; each VM runs on one of them.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="false",message="failoverCluster is not supported yet: HyperFleet does not make its VMs failover-cluster roles; list the cluster's nodes in hosts and remove failoverCluster"
	FailoverCluster string `json:"failoverCluster,omitempty"`

	// vmPath holds the VMs' configuration files.
	// +optional
	// +kubebuilder:validation:MaxLength=240
	// +kubebuilder:validation:Pattern=`^(?:[A-Za-z]:\\|\\\\[^\\'"]+\\)[^'"*?<>|]*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'[\\x00-\\x1f\\x7f\\x22\\x27\\x{2018}-\\x{201e}]')",message="must hold no quote of any kind (' \" ‘ ’ ‚ ‛ “ ” „) and no control character: PowerShell would end the path's string at the quote and run what follows"
	VMPath string `json:"vmPath,omitempty"`

	// vhdPath holds the VMs' differencing disks (the linked clones of the template VHDX).
	// +optional
	// +kubebuilder:validation:MaxLength=240
	// +kubebuilder:validation:Pattern=`^(?:[A-Za-z]:\\|\\\\[^\\'"]+\\)[^'"*?<>|]*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'[\\x00-\\x1f\\x7f\\x22\\x27\\x{2018}-\\x{201e}]')",message="must hold no quote of any kind (' \" ‘ ’ ‚ ‛ “ ” „) and no control character: PowerShell would end the path's string at the quote and run what follows"
	VHDPath string `json:"vhdPath,omitempty"`

	// templatePath holds the template VHDX files.
	// +optional
	// +kubebuilder:validation:MaxLength=240
	// +kubebuilder:validation:Pattern=`^(?:[A-Za-z]:\\|\\\\[^\\'"]+\\)[^'"*?<>|]*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'[\\x00-\\x1f\\x7f\\x22\\x27\\x{2018}-\\x{201e}]')",message="must hold no quote of any kind (' \" ‘ ’ ‚ ‛ “ ” „) and no control character: PowerShell would end the path's string at the quote and run what follows"
	TemplatePath string `json:"templatePath,omitempty"`

	// seedISOPath holds the VMs' NoCloud seed ISOs.
	// +optional
	// +kubebuilder:validation:MaxLength=240
	// +kubebuilder:validation:Pattern=`^(?:[A-Za-z]:\\|\\\\[^\\'"]+\\)[^'"*?<>|]*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'[\\x00-\\x1f\\x7f\\x22\\x27\\x{2018}-\\x{201e}]')",message="must hold no quote of any kind (' \" ‘ ’ ‚ ‛ “ ” „) and no control character: PowerShell would end the path's string at the quote and run what follows"
	SeedISOPath string `json:"seedISOPath,omitempty"`

	// modulePath is where HyperFleet installs its PowerShell module on each host, one folder per
	// version.
	// +optional
	// +kubebuilder:validation:MaxLength=240
	// +kubebuilder:validation:Pattern=`^(?:[A-Za-z]:\\|\\\\[^\\'"]+\\)[^'"*?<>|]*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches(r'[\\x00-\\x1f\\x7f\\x22\\x27\\x{2018}-\\x{201e}]')",message="must hold no quote of any kind (' \" ‘ ’ ‚ ‛ “ ” „) and no control character: PowerShell would end the path's string at the quote and run what follows"
	ModulePath string `json:"modulePath,omitempty"`

	// secureBootTemplate is the Secure Boot template of every new VM: MicrosoftUEFICertificateAuthority
	// (the default, for Linux guests booting a signed shim), MicrosoftWindows (Windows guests),
	// OpenSourceShieldedVM, or Off to disable Secure Boot.
	// +optional
	// +kubebuilder:validation:Enum=MicrosoftUEFICertificateAuthority;MicrosoftWindows;OpenSourceShieldedVM;Off
	SecureBootTemplate string `json:"secureBootTemplate,omitempty"`
}

// VMIDRange is an inclusive range of Proxmox VMIDs.
type VMIDRange struct {
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=999999999
	Start int32 `json:"start"`
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=999999999
	End int32 `json:"end"`
}

// HypervisorClusterInitializationStatus is the Cluster API v1beta2 initialization contract.
type HypervisorClusterInitializationStatus struct {
	// provisioned is true once the hypervisor has been reached and verified at least once.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// HypervisorClusterStatus is what HyperFleet observed about the cluster.
type HypervisorClusterStatus struct {
	// initialization is the Cluster API provisioning contract.
	// +optional
	Initialization *HypervisorClusterInitializationStatus `json:"initialization,omitempty"`

	// conditions: Ready (summary), Available (API reachable and authorized), InsecureTransport
	// (True while the API is reached over http:// or without TLS verification), Paused,
	// HostsDrained (hosts in maintenance are empty).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// failureDomains are the allowed, online nodes.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// version is the hypervisor's reported version.
	// +optional
	Version string `json:"version,omitempty"`

	// nodes is the number of online nodes VMs may be placed on.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`

	// ownedVMs is the number of VMs HyperFleet owns on this cluster, as of the last sweep.
	// +optional
	OwnedVMs int32 `json:"ownedVMs,omitempty"`

	// lastSweepTime is when stopped and orphaned VMs were last looked for.
	// +optional
	LastSweepTime *metav1.Time `json:"lastSweepTime,omitempty"`

	// hosts reports the drain of each host in maintenance: persistent VMs and runners left,
	// migrations under way, and what blocks it.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	Hosts []HostStatus `json:"hosts,omitempty"`

	// observedGeneration is the generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// DrainPolicy is how a host drain retries a failed migration: the second attempt starts
// retryInitialSeconds after the first failed, each further one twice as long after the last
// failure, never longer than retryMaxSeconds; after maxAttempts failed migrations of a VM the
// drain reports it (HostsDrained False, reason MigrationFailed) and leaves it.
// +kubebuilder:validation:XValidation:rule="self.retryMaxSeconds >= self.retryInitialSeconds",message="retryMaxSeconds must not be below retryInitialSeconds"
type DrainPolicy struct {
	// maxAttempts is how many migrations of one VM a drain tries. Default 5.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=20
	MaxAttempts int32 `json:"maxAttempts,omitempty"`

	// retryInitialSeconds is the wait after the first failure. Default 30.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3600
	RetryInitialSeconds int32 `json:"retryInitialSeconds,omitempty"`

	// retryMaxSeconds caps the doubling wait. Default 600.
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	RetryMaxSeconds int32 `json:"retryMaxSeconds,omitempty"`
}

// HypervisorHost is one hypervisor host's labels and maintenance flag.
type HypervisorHost struct {
	// name is the host's name on the hypervisor (a Proxmox node).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$`
	Name string `json:"name"`

	// labels describe the host (rack, CPU generation, GPU) for persistent VMs' hostSelectors.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	Labels map[string]string `json:"labels,omitempty"`

	// maintenance takes the host out of placement: no new VM goes there and no migration targets
	// it. HyperFleet drains it: persistent VMs move away through MachineMigrations it creates,
	// one at a time, and idle runners are retired; status.hosts reports the progress.
	// +optional
	Maintenance bool `json:"maintenance,omitempty"`
}

// HostsInMaintenance lists the hosts marked for maintenance.
func (s *HypervisorClusterSpec) HostsInMaintenance() []string {
	var out []string
	for _, h := range s.Hosts {
		if h.Maintenance {
			out = append(out, h.Name)
		}
	}
	return out
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=hypervisorclusters,scope=Namespaced,categories=cluster-api;hyperfleet,shortName=hvc
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",description="Cluster API Cluster"
// +kubebuilder:printcolumn:name="Provider",type="string",JSONPath=".spec.provider"
// +kubebuilder:printcolumn:name="Endpoint",type="string",JSONPath=".spec.endpoint"
// +kubebuilder:printcolumn:name="Installation",type="string",JSONPath=".spec.installationID"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Nodes",type="integer",JSONPath=".status.nodes"
// +kubebuilder:printcolumn:name="VMs",type="integer",JSONPath=".status.ownedVMs"
// +kubebuilder:printcolumn:name="Version",type="string",JSONPath=".status.version",priority=1
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message",priority=1
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// HypervisorCluster is a hypervisor cluster (Proxmox VE, or a set of Hyper-V hosts) that HyperFleet places VMs on: the Cluster API
// infrastructure cluster of a runner fleet.
type HypervisorCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   HypervisorClusterSpec   `json:"spec,omitempty"`
	Status HypervisorClusterStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (c *HypervisorCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the status conditions.
func (c *HypervisorCluster) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// HypervisorClusterList is a list of HypervisorClusters.
type HypervisorClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HypervisorCluster `json:"items"`
}

func init() {
	SchemeBuilder.Register(&HypervisorCluster{}, &HypervisorClusterList{})
}
