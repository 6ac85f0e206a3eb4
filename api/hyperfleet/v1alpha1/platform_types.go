package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PlatformSpec names the pool's CI platform: exactly one member is set. Its name is the
// platform's kind (the pool's status.platform and the receiver's route /webhooks/<kind>).
// +kubebuilder:validation:XValidation:rule="[has(self.github), has(self.gitlab), has(self.buildkite)].filter(x, x).size() == 1",message="set exactly one of platform.github, platform.gitlab or platform.buildkite"
// +kubebuilder:validation:XValidation:rule="has(self.github) == has(oldSelf.github) && has(self.gitlab) == has(oldSelf.gitlab) && has(self.buildkite) == has(oldSelf.buildkite)",message="the pool's CI platform is immutable: create a new pool for another platform"
type PlatformSpec struct {
	// github: runners are GitHub Actions self-hosted runners registered with a GitHub App.
	// +optional
	GitHub *GitHubSpec `json:"github,omitempty"`

	// gitlab: runners are GitLab Runners, each created with its own runner authentication token.
	// +optional
	GitLab *GitLabSpec `json:"gitlab,omitempty"`

	// buildkite: runners are Buildkite agents of a cluster queue, each with its own agent token.
	// +optional
	Buildkite *BuildkiteSpec `json:"buildkite,omitempty"`
}

// GitHubSpec is where the pool's runners register and which jobs they take.
// +kubebuilder:validation:XValidation:rule="has(self.organization) || has(self.repository)",message="set github.organization or github.repository (repository wins when both are set)"
// +kubebuilder:validation:XValidation:rule="!has(self.apiURL) || !self.apiURL.startsWith('http://') || (has(self.allowInsecureHTTP) && self.allowInsecureHTTP)",message="apiURL is http://: the App's tokens would travel in clear text; use https:// or, for a lab, set allowInsecureHTTP: true"
// +kubebuilder:validation:XValidation:rule="!has(self.caBundleRef) || !has(self.apiURL) || self.apiURL.startsWith('https://')",message="caBundleRef needs an https:// apiURL: a CA bundle means nothing over plain HTTP"
// +kubebuilder:validation:XValidation:rule="!has(self.pollInterval) || (has(self.demand) && self.demand != 'Webhook')",message="pollInterval needs demand: Polling or Both"
type GitHubSpec struct {
	// organization whose jobs the runners take (organization-level runners).
	// +optional
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9-]*$`
	Organization string `json:"organization,omitempty"`

	// repository owner/name whose jobs the runners take; wins over organization.
	// +optional
	// +kubebuilder:validation:MaxLength=140
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+$`
	Repository string `json:"repository,omitempty"`

	// labels of the runners. A job runs on a runner whose labels contain all its runs-on labels
	// (case-insensitive); self-hosted is always added.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Labels []string `json:"labels"`

	// runnerGroupID the runners join (a GitHub runner group). Default 1 (the Default group).
	// +optional
	// +kubebuilder:validation:Minimum=1
	RunnerGroupID int64 `json:"runnerGroupID,omitempty"`

	// credentialsRef names a Secret with the GitHub App: keys app-id, private-key and optionally installation-id.
	CredentialsRef LocalObjectReference `json:"credentialsRef"`

	// apiURL of the GitHub API, for GitHub Enterprise Server. Default https://api.github.com/.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="apiURL must be an http:// or https:// URL"
	APIURL string `json:"apiURL,omitempty"`

	// allowInsecureHTTP lets apiURL be an http:// URL, over which the App's JWT and installation
	// tokens travel in clear text. Only for labs: while apiURL is http:// the pool's
	// InsecureTransport condition is True (reason PlainHTTP) and a Warning Event says so.
	// +optional
	AllowInsecureHTTP bool `json:"allowInsecureHTTP,omitempty"`

	// caBundleRef points at a Secret key in the pool's namespace with the PEM CA bundle that signs
	// the GitHub API's certificate (default key ca.crt), e.g. GitHub Enterprise Server behind a
	// private CA. It replaces the system roots for this pool's App-token and API calls; the
	// certificate is always verified. Without it the system roots are used.
	// +optional
	CABundleRef *SecretKeyReference `json:"caBundleRef,omitempty"`

	// httpTimeout bounds each GitHub API call. Default 30s.
	// +optional
	HTTPTimeout *metav1.Duration `json:"httpTimeout,omitempty"`

	// demand is where the pool learns of queued jobs. Webhook (default): workflow_job deliveries
	// to the receiver's /webhooks/github route, checked by the repair loop. Polling: the manager
	// reads the pool's queued jobs from the GitHub API every pollInterval, for sites no webhook
	// can reach (outbound HTTPS only). Both: deliveries and polls together; each job counts once.
	// +optional
	// +kubebuilder:default=Webhook
	Demand GitHubDemand `json:"demand,omitempty"`

	// pollInterval between two polls of the pool's scope (demand Polling or Both), between 10s
	// and 10m. Default 30s. Pools of one App installation and scope share one poller, which
	// polls at the shortest interval among them. Each poll costs rate limit: see docs/platforms.md.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('10m')",message="pollInterval must be between 10s and 10m: shorter polls spend the App's rate limit, longer ones leave jobs waiting"
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`
}

// GitHubDemand is where a GitHub pool's demand comes from.
// +kubebuilder:validation:Enum=Webhook;Polling;Both
type GitHubDemand string

// GitHub demand sources.
const (
	// GitHubDemandWebhook: webhook deliveries only (the default).
	GitHubDemandWebhook GitHubDemand = "Webhook"
	// GitHubDemandPolling: polls of the GitHub API only; no webhook is needed.
	GitHubDemandPolling GitHubDemand = "Polling"
	// GitHubDemandBoth: webhook deliveries and polls.
	GitHubDemandBoth GitHubDemand = "Both"
)

// Polls reports whether the pool's demand comes (also) from polling the GitHub API.
func (s *GitHubSpec) Polls() bool {
	return s != nil && (s.Demand == GitHubDemandPolling || s.Demand == GitHubDemandBoth)
}

// GitLabAccessLevel says which jobs a GitLab runner may take.
// +kubebuilder:validation:Enum=not_protected;ref_protected
type GitLabAccessLevel string

// GitLab runner access levels.
const (
	// GitLabNotProtected: jobs of any branch or tag.
	GitLabNotProtected GitLabAccessLevel = "not_protected"
	// GitLabRefProtected: only jobs of protected branches and tags.
	GitLabRefProtected GitLabAccessLevel = "ref_protected"
)

// GitLabScope is where a GitLab pool's runners are created: exactly one of instance, group or
// project.
// +kubebuilder:validation:XValidation:rule="[has(self.instance) && self.instance, has(self.group), has(self.project)].filter(x, x).size() == 1",message="set exactly one of scope.instance: true, scope.group or scope.project"
type GitLabScope struct {
	// instance: instance runners, for every project of the GitLab (needs an administrator's token).
	// +optional
	Instance bool `json:"instance,omitempty"`

	// group full path, e.g. "platform" or "platform/ci": group runners, for every project below it.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.][A-Za-z0-9_.-]*(/[A-Za-z0-9_.][A-Za-z0-9_.-]*)*$`
	Group string `json:"group,omitempty"`

	// project full path, e.g. "platform/ci/builder": project runners for that project only.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.][A-Za-z0-9_.-]*(/[A-Za-z0-9_.][A-Za-z0-9_.-]*)+$`
	Project string `json:"project,omitempty"`
}

// GitLabSpec is where a GitLab pool's runners are created and which jobs they take.
// +kubebuilder:validation:XValidation:rule="!self.url.startsWith('http://') || (has(self.allowInsecureHTTP) && self.allowInsecureHTTP)",message="url is http://: the token would travel in clear text; use https:// or, for a lab, set allowInsecureHTTP: true"
// +kubebuilder:validation:XValidation:rule="!has(self.caBundleRef) || self.url.startsWith('https://')",message="caBundleRef needs an https:// url: a CA bundle means nothing over plain HTTP"
// +kubebuilder:validation:XValidation:rule="(has(self.tags) && size(self.tags) > 0) || (has(self.runUntagged) && self.runUntagged)",message="set tags, runUntagged: true, or both: a runner with neither takes no job"
type GitLabSpec struct {
	// url of the GitLab instance, e.g. https://gitlab.com or https://gitlab.example.com.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="url must be an http:// or https:// URL"
	URL string `json:"url"`

	// scope the runners are created in: the instance, a group or a project.
	Scope GitLabScope `json:"scope"`

	// tags of the runners. A job runs on a runner that has all its tags (case-insensitive).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	Tags []string `json:"tags,omitempty"`

	// runUntagged lets the runners take jobs without tags.
	// +optional
	RunUntagged bool `json:"runUntagged,omitempty"`

	// accessLevel: not_protected (default) takes jobs of any ref, ref_protected only jobs of
	// protected branches and tags.
	// +optional
	// +kubebuilder:default=not_protected
	AccessLevel GitLabAccessLevel `json:"accessLevel,omitempty"`

	// credentialsRef names a Secret with key "token": a personal, group or project access token
	// with the create_runner, manage_runner (to delete a VM's runner) and read_api scopes
	// (instance runners: an administrator's).
	CredentialsRef LocalObjectReference `json:"credentialsRef"`

	// allowInsecureHTTP lets url be http://, over which the token travels in clear text. Only for
	// labs: the pool's InsecureTransport condition is True (reason PlainHTTP) while it is.
	// +optional
	AllowInsecureHTTP bool `json:"allowInsecureHTTP,omitempty"`

	// caBundleRef points at a Secret key with the PEM CA bundle that signs the instance's
	// certificate (default key ca.crt); it replaces the system roots for this pool.
	// +optional
	CABundleRef *SecretKeyReference `json:"caBundleRef,omitempty"`

	// httpTimeout bounds each GitLab API call. Default 30s.
	// +optional
	HTTPTimeout *metav1.Duration `json:"httpTimeout,omitempty"`
}

// BuildkiteSpec is which Buildkite cluster queue a pool's agents serve.
// +kubebuilder:validation:XValidation:rule="!has(self.apiURL) || !self.apiURL.startsWith('http://') || (has(self.allowInsecureHTTP) && self.allowInsecureHTTP)",message="apiURL is http://: the token would travel in clear text; use https:// or, for a lab, set allowInsecureHTTP: true"
// +kubebuilder:validation:XValidation:rule="!has(self.agentEndpoint) || !self.agentEndpoint.startsWith('http://') || (has(self.allowInsecureHTTP) && self.allowInsecureHTTP)",message="agentEndpoint is http://: agent tokens would travel in clear text; use https:// or, for a lab, set allowInsecureHTTP: true"
// +kubebuilder:validation:XValidation:rule="!has(self.caBundleRef) || !has(self.apiURL) || self.apiURL.startsWith('https://')",message="caBundleRef needs an https:// apiURL: a CA bundle means nothing over plain HTTP"
type BuildkiteSpec struct {
	// organization slug, e.g. "acme".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9-]*$`
	Organization string `json:"organization"`

	// cluster is the UUID of the Buildkite cluster whose queue the agents serve.
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`
	Cluster string `json:"cluster"`

	// queue key of the cluster queue the agents join. Default "default".
	// +optional
	// +kubebuilder:validation:MaxLength=100
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_.-]+$`
	Queue string `json:"queue,omitempty"`

	// tags of the agents as key=value, matched against the jobs' agent query rules.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9_.-]+=.*$`
	Tags []string `json:"tags,omitempty"`

	// credentialsRef names a Secret with key "token": an API access token with the
	// write_clusters and read_clusters scopes (and read_builds for repair), used to create an
	// agent token per VM and delete it when the VM goes.
	CredentialsRef LocalObjectReference `json:"credentialsRef"`

	// apiURL of Buildkite's REST API. Default https://api.buildkite.com/.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="apiURL must be an http:// or https:// URL"
	APIURL string `json:"apiURL,omitempty"`

	// agentEndpoint is the agent API the VMs connect to. Default https://agent.buildkite.com/v3.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="agentEndpoint must be an http:// or https:// URL"
	AgentEndpoint string `json:"agentEndpoint,omitempty"`

	// allowInsecureHTTP lets apiURL and agentEndpoint be http://. Only for labs: the pool's
	// InsecureTransport condition is True (reason PlainHTTP) while it is.
	// +optional
	AllowInsecureHTTP bool `json:"allowInsecureHTTP,omitempty"`

	// caBundleRef points at a Secret key with the PEM CA bundle that signs the API's certificate
	// (default key ca.crt); it replaces the system roots for this pool.
	// +optional
	CABundleRef *SecretKeyReference `json:"caBundleRef,omitempty"`

	// httpTimeout bounds each Buildkite API call. Default 30s.
	// +optional
	HTTPTimeout *metav1.Duration `json:"httpTimeout,omitempty"`
}
