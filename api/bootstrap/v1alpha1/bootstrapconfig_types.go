package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SPIREFinalizer keeps a BootstrapConfig with provider SPIRE until HyperFleet has deleted the
// registration entries it created on the SPIRE server for the Machine and evicted its agent.
const SPIREFinalizer = "spire.bootstrapconfig.bootstrap.cluster.x-k8s.io"

// RunnerRetiredAnnotation on a BootstrapConfig says its RunnerPool removed the runner before the
// bootstrap service issued its runner config: the service never issues it afterwards. The pool sets
// it with the config's resourceVersion and the service claims the config the same way, so exactly
// one of them wins.
const RunnerRetiredAnnotation = "hyperfleet.io/runner-retired"

// BootstrapDataDeliveredAnnotation on a BootstrapConfig says a MachineClaim is about to give (or
// gave) its bootstrap data to a VM: from then on the join token in it is never replaced. The claim
// sets it with the config's resourceVersion before it reads the data Secret, and a replacement
// records its new token's hash with the resourceVersion it read, so of the two exactly one wins.
const BootstrapDataDeliveredAnnotation = "hyperfleet.io/bootstrap-data-delivered"

// JoinTokenHashAnnotation on a bootstrap data Secret is the SHA-256 of the join token in it, as in
// the BootstrapConfig's status.joinToken.sha256: a claim gives a VM the data only when the two
// agree, so a Secret whose token is being replaced is never delivered.
const JoinTokenHashAnnotation = "hyperfleet.io/join-token-sha256"

// AttestationMethod is how a VM proves its identity to the bootstrap service.
// +kubebuilder:validation:Enum=JoinToken;TPM
type AttestationMethod string

const (
	// AttestationJoinToken: a single-use, short-lived join token in the VM's cloud-init.
	AttestationJoinToken AttestationMethod = "JoinToken"
	// AttestationTPM: the VM's (software) TPM endorsement key.
	AttestationTPM AttestationMethod = "TPM"
)

// IdentityProvider issues the VM's SPIFFE identity.
// +kubebuilder:validation:Enum=Builtin;SPIRE
type IdentityProvider string

const (
	// IdentityBuiltin: HyperFleet's bootstrap service redeems the token and issues the X509-SVID itself.
	IdentityBuiltin IdentityProvider = "Builtin"
	// IdentitySPIRE: an external SPIRE server issues join tokens and SVIDs.
	IdentitySPIRE IdentityProvider = "SPIRE"
)

// AttestationSpec chooses how the VM is identified.
// +kubebuilder:validation:XValidation:rule="!has(self.provider) || self.provider != 'SPIRE' || has(self.spireServerAddress)",message="provider SPIRE needs spireServerAddress"
// +kubebuilder:validation:XValidation:rule="!has(self.provider) || self.provider != 'SPIRE' || !has(self.method) || self.method != 'TPM'",message="method TPM works with provider Builtin only: SPIRE attests VMs with join tokens here (SPIRE's own TPM node attestor is not wired); use Builtin/TPM or SPIRE/JoinToken"
type AttestationSpec struct {
	// method of attestation. Default JoinToken.
	// +optional
	// +kubebuilder:default=JoinToken
	Method AttestationMethod `json:"method,omitempty"`

	// provider of SPIFFE identities. Default Builtin.
	// +optional
	// +kubebuilder:default=Builtin
	Provider IdentityProvider `json:"provider,omitempty"`

	// trustDomain of the issued SPIFFE IDs. Default hyperfleet.local.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[a-z0-9._-]+$`
	TrustDomain string `json:"trustDomain,omitempty"`

	// joinTokenTTL bounds how long a join token can be redeemed. Default 15m, at most 24h: a
	// leaked token must not stay good for long.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('24h')",message="joinTokenTTL must be more than 0s and at most 24h"
	JoinTokenTTL *metav1.Duration `json:"joinTokenTTL,omitempty"`

	// spireServerAddress names the SPIRE server, for provider SPIRE. The manager administers only
	// the SPIRE server of its own settings: this must be one of that server's addresses in the
	// manager's settings (its admin address, or the host:port VMs' spire-agent dial); any other
	// address is refused with reason SPIREServerNotAllowed and never dialled.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	SPIREServerAddress string `json:"spireServerAddress,omitempty"`
}

// RunnerSpec describes how the in-VM agent installs and runs the CI runner.
type RunnerSpec struct {
	// os of the runner's VM. Only linux: the agent runs on Linux guests (Windows and macOS
	// runners are not supported yet).
	// +optional
	// +kubebuilder:validation:Enum=linux
	OS string `json:"os,omitempty"`

	// arch of the runner's VM: x64 or arm64. When set, the agent checks it against the guest's
	// architecture before it attests and powers the VM off if they differ, so a pool whose template
	// is of another architecture fails at once instead of running jobs on the wrong machine.
	// +optional
	// +kubebuilder:validation:Enum=x64;arm64
	Arch string `json:"arch,omitempty"`

	// downloadURL of the runner package (tar.gz); empty when the template already contains the runner.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="downloadURL must be an http:// or https:// URL"
	DownloadURL string `json:"downloadURL,omitempty"`

	// sha256 of the runner package, checked before it is unpacked.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{64}$`
	SHA256 string `json:"sha256,omitempty"`

	// directory the runner lives in inside the VM. Default /opt/actions-runner.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Directory string `json:"directory,omitempty"`

	// runScript is the runner's run script, relative to directory. Default run.sh.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	RunScript string `json:"runScript,omitempty"`

	// idleTimeout powers the VM off when no job has started within it. Default 15m.
	// +optional
	IdleTimeout *metav1.Duration `json:"idleTimeout,omitempty"`

	// user runs the runner inside the VM. Default runner.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	User string `json:"user,omitempty"`
}

// AgentSpec tells cloud-init where HyperFleet's agent comes from and how it ends the VM.
type AgentSpec struct {
	// binaryPath is where the agent binary lives (or is installed to) inside the VM.
	// Default /usr/local/bin/hyperfleet-agent.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	BinaryPath string `json:"binaryPath,omitempty"`

	// downloadURL of the agent binary; empty when the template already contains it.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="downloadURL must be an http:// or https:// URL"
	DownloadURL string `json:"downloadURL,omitempty"`

	// sha256 of the agent binary, checked before it is installed.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{64}$`
	SHA256 string `json:"sha256,omitempty"`

	// powerOffCommand ends the VM after its job, on idle timeout or when its credentials are
	// refused. Default ["systemctl", "poweroff"].
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	PowerOffCommand []string `json:"powerOffCommand,omitempty"`
}

// BootstrapConfigSpec describes the bootstrap of one runner VM.
type BootstrapConfigSpec struct {
	// attestation chooses how the VM proves its identity.
	// +optional
	Attestation AttestationSpec `json:"attestation,omitempty,omitzero"`

	// runner tells the agent how to install and run the CI runner.
	// +optional
	Runner RunnerSpec `json:"runner,omitempty,omitzero"`

	// agent tells cloud-init how to install and run HyperFleet's agent.
	// +optional
	Agent AgentSpec `json:"agent,omitempty,omitzero"`

	// bootstrapServiceURL is the address VMs reach the bootstrap service at; default the
	// manager's configured address.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://')",message="bootstrapServiceURL must be an https:// URL"
	BootstrapServiceURL string `json:"bootstrapServiceURL,omitempty"`

	// userData is extra #cloud-config merged under the rendered bootstrap data.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	UserData string `json:"userData,omitempty"`
}

// BootstrapConfigInitializationStatus is the Cluster API v1beta2 bootstrap contract.
type BootstrapConfigInitializationStatus struct {
	// dataSecretCreated is true once the bootstrap data Secret exists.
	// +optional
	DataSecretCreated *bool `json:"dataSecretCreated,omitempty"`
}

// JoinTokenStatus records a builtin join token by its hash, so that any bootstrap-service replica
// can redeem it, and only once: redemption sets redeemedTime with an optimistic-concurrency update.
type JoinTokenStatus struct {
	// sha256 of the join token, hex-encoded. The token itself exists only in the data Secret.
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{64}$`
	SHA256 string `json:"sha256"`

	// redeemedTime is when the VM exchanged the token for its X509-SVID.
	// +optional
	RedeemedTime *metav1.Time `json:"redeemedTime,omitempty"`
}

// AttestedSVID identifies an X509-SVID without holding it.
type AttestedSVID struct {
	// serialNumber of the certificate, hex-encoded.
	// +kubebuilder:validation:MaxLength=64
	SerialNumber string `json:"serialNumber"`
	// sha256 of the certificate's DER, hex-encoded.
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{64}$`
	SHA256 string `json:"sha256"`
}

// AttestedTPM identifies the TPM a VM attested with, for the job's record.
type AttestedTPM struct {
	// ekSHA256 is the SHA-256 of the endorsement key's public key (PKIX DER), hex-encoded: the
	// value the bootstrap.hyperfleet.io/tpm-ek-sha256 annotation enrols.
	// +kubebuilder:validation:Pattern=`^[a-f0-9]{64}$`
	EKSHA256 string `json:"ekSHA256"`
}

// BootstrapConfigStatus is the state of the bootstrap.
type BootstrapConfigStatus struct {
	// initialization is the Cluster API bootstrap contract.
	// +optional
	Initialization *BootstrapConfigInitializationStatus `json:"initialization,omitempty"`

	// dataSecretName names the Secret holding the cloud-init user-data (key value).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	DataSecretName *string `json:"dataSecretName,omitempty"`

	// spiffeID the VM will hold once attested.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	SPIFFEID string `json:"spiffeID,omitempty"`

	// tokenExpirationTime is when the join token stops being redeemable.
	// +optional
	TokenExpirationTime *metav1.Time `json:"tokenExpirationTime,omitempty"`

	// joinToken records the builtin join token; empty for external identity providers.
	// +optional
	JoinToken *JoinTokenStatus `json:"joinToken,omitempty"`

	// runnerConfigTime is when the bootstrap service claimed the VM's one-time runner config; a
	// second request for it is refused.
	// +optional
	RunnerConfigTime *metav1.Time `json:"runnerConfigTime,omitempty"`

	// attestedTime is when the VM proved its identity and received its runner config.
	// +optional
	AttestedTime *metav1.Time `json:"attestedTime,omitempty"`

	// attestedSVID identifies the X509-SVID the VM presented when it received its runner config,
	// for the job's record.
	// +optional
	AttestedSVID *AttestedSVID `json:"attestedSVID,omitempty"`

	// attestedTPM identifies the TPM whose endorsement key answered the credential challenge
	// (attestation method TPM only).
	// +optional
	AttestedTPM *AttestedTPM `json:"attestedTPM,omitempty"`

	// conditions: Ready, DataSecretAvailable, Attested, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=bootstrapconfigs,scope=Namespaced,categories=cluster-api;hyperfleet,shortName=hfbc
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta1=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
// +kubebuilder:printcolumn:name="Secret",type="string",JSONPath=".status.dataSecretName"
// +kubebuilder:printcolumn:name="Attested",type="date",JSONPath=".status.attestedTime"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// BootstrapConfig is the bootstrap of one runner VM: cloud-init that starts HyperFleet's agent with a
// single-use join token.
type BootstrapConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BootstrapConfigSpec   `json:"spec,omitempty"`
	Status BootstrapConfigStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions.
func (c *BootstrapConfig) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions replaces the status conditions.
func (c *BootstrapConfig) SetConditions(conditions []metav1.Condition) {
	c.Status.Conditions = conditions
}

// +kubebuilder:object:root=true

// BootstrapConfigList is a list of BootstrapConfigs.
type BootstrapConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BootstrapConfig `json:"items"`
}

func init() {
	SchemeBuilder.Register(&BootstrapConfig{}, &BootstrapConfigList{})
}
