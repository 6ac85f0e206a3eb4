package bootstrapconfig

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/spire"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/tenancy"
)

// reconcileDataSecret writes the bootstrap data Secret once. The join token's hash is recorded in
// status (with optimistic locking) before the token is written into the Secret, so a token that
// reaches a VM is always one the bootstrap service can redeem.
func (r *Reconciler) reconcileDataSecret(ctx context.Context, s *bootstrapScope) (ctrl.Result, error) {
	c := s.config
	if dataSecretCreated(c) && r.secrets.recent(c.UID, recordedTokenHash(c), time.Now()) {
		return ctrl.Result{}, nil
	}
	secret := &corev1.Secret{}
	err := tenancy.Check(r.Client.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Name}, secret), c.Namespace)
	switch {
	case errors.Is(err, tenancy.ErrNamespaceNotEnabled):
		setDataSecretCondition(c, metav1.ConditionFalse, bootstrapv1.NamespaceNotEnabledReason, err.Error())
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	case err == nil:
		if !metav1.IsControlledBy(secret, c) {
			setDataSecretCondition(c, metav1.ConditionFalse, bootstrapv1.DataSecretFailedReason,
				fmt.Sprintf("Secret %s exists and is not controlled by this BootstrapConfig", c.Name))
			return ctrl.Result{}, nil
		}
		if h := secret.Annotations[bootstrapv1.JoinTokenHashAnnotation]; h != "" && h != recordedTokenHash(c) {
			// A replacement recorded its token's hash and then failed to write the Secret: no
			// claim gives this Secret to a VM (the hashes differ), so mint once more.
			return r.mint(ctx, s)
		}
		markDataSecretCreated(c)
		r.secrets.saw(c.UID, recordedTokenHash(c), time.Now())
		return ctrl.Result{}, nil
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	case dataSecretCreated(c):
		r.secrets.forget(c.UID)
		// Never mint a second token for a VM that may already run with the first.
		setDataSecretCondition(c, metav1.ConditionFalse, bootstrapv1.DataSecretFailedReason,
			fmt.Sprintf("bootstrap data Secret %s was deleted after it was handed out", c.Name))
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}

	return r.mint(ctx, s)
}

// mint mints the join token (or SPIRE credential), records its hash and writes the data Secret.
func (r *Reconciler) mint(ctx context.Context, s *bootstrapScope) (ctrl.Result, error) {
	c := s.config
	r.secrets.forget(c.UID) // the next reconcile reads what this one wrote, or failed to
	if res, ok := r.checkAttestationSupported(c); !ok {
		return res, nil
	}
	// Check before minting: a token recorded for a config that cannot be rendered would be burnt.
	if r.serviceURL(c) == "" {
		msg := "no bootstrap service URL: set spec.bootstrapServiceURL or the manager's BOOTSTRAP_SERVICE_URL to an address VMs can reach"
		if isSPIRE(c) {
			msg = "no bootstrap service URL for provider SPIRE: set spec.bootstrapServiceURL or the manager's SPIRE_BOOTSTRAP_SERVICE_URL " +
				"to the address VMs reach the bootstrap service's SPIRE endpoint (--spire-listen) at"
		}
		setDataSecretCondition(c, metav1.ConditionFalse, bootstrapv1.DataSecretFailedReason, msg)
		return ctrl.Result{}, nil
	}
	td, err := spiffeid.TrustDomainFromString(r.trustDomain(c))
	if err != nil {
		setDataSecretCondition(c, metav1.ConditionFalse, bootstrapv1.JoinTokenFailedReason, err.Error())
		return ctrl.Result{}, nil
	}
	provisioner, err := r.provisionerFor(ctx, c)
	if err != nil {
		setDataSecretCondition(c, metav1.ConditionFalse, bootstrapv1.JoinTokenFailedReason, err.Error())
		return ctrl.Result{}, err
	}
	bundle, err := provisioner.TrustBundlePEM(ctx)
	if err != nil {
		setDataSecretCondition(c, metav1.ConditionFalse, bootstrapv1.JoinTokenFailedReason, "trust bundle: "+err.Error())
		return ctrl.Result{}, err
	}
	ttl := joinTokenTTL(c)
	if stale, err := r.staleCopy(ctx, c); err != nil || stale {
		return ctrl.Result{}, err // the newer version's event brings us back
	}
	cred, err := provisioner.Provision(ctx, td, identity.Machine{Namespace: c.Namespace, Name: s.machine.Name, BootstrapConfig: c.Name}, ttl)
	if err != nil {
		setDataSecretCondition(c, metav1.ConditionFalse, bootstrapv1.JoinTokenFailedReason, err.Error())
		if needsOperator(err) {
			return ctrl.Result{RequeueAfter: time.Minute}, nil // retrying at once cannot help
		}
		return ctrl.Result{}, err
	}
	if err := r.recordCredential(ctx, c, cred); err != nil {
		return ctrl.Result{}, err
	}
	in := bootstrap.Input{
		Namespace: c.Namespace, Machine: s.machine.Name, Spec: c.Spec, ServiceURL: r.serviceURL(c),
		TrustDomain: td.Name(), TrustBundlePEM: bundle, Credential: cred,
	}
	if isSPIRE(c) {
		in.SPIRE = &bootstrap.SPIREAgent{ServerAddress: r.spireAgentServerAddress(c)}
	}
	r.addRunnerPool(ctx, s.machine, &in)
	userData, err := bootstrap.RenderUserData(in)
	if err != nil {
		setDataSecretCondition(c, metav1.ConditionFalse, bootstrapv1.DataSecretFailedReason, err.Error())
		return ctrl.Result{}, nil // fixing the spec (or the operator's default) brings us back
	}
	if err := r.writeDataSecret(ctx, s, userData); err != nil {
		return ctrl.Result{}, err
	}
	markDataSecretCreated(c)
	r.secrets.saw(c.UID, recordedTokenHash(c), time.Now())
	r.Recorder.Eventf(c, corev1.EventTypeNormal, bootstrapv1.DataSecretCreatedReason,
		"bootstrap data Secret %s created for %s; join token valid until %s", c.Name, cred.ID, cred.ExpiresAt.UTC().Format(time.RFC3339))
	return ctrl.Result{}, nil
}

// joinTokenTTL is how long c's join tokens may be redeemed.
func joinTokenTTL(c *bootstrapv1.BootstrapConfig) time.Duration {
	if c.Spec.Attestation.JoinTokenTTL != nil && c.Spec.Attestation.JoinTokenTTL.Duration > 0 {
		return min(c.Spec.Attestation.JoinTokenTTL.Duration, bootstrap.MaxJoinTokenTTL)
	}
	return bootstrap.DefaultJoinTokenTTL
}

// checkAttestationSupported refuses what is designed but not built yet, or not configured on
// this manager, with a clear condition.
func (r *Reconciler) checkAttestationSupported(c *bootstrapv1.BootstrapConfig) (ctrl.Result, bool) {
	a := c.Spec.Attestation
	var problem string
	switch {
	case a.Method == bootstrapv1.AttestationTPM && (a.Provider == "" || a.Provider == bootstrapv1.IdentityBuiltin):
		// Builtin join token plus TPM proof of possession, redeemed by the bootstrap service.
		return ctrl.Result{}, true
	case a.Method != "" && a.Method != bootstrapv1.AttestationJoinToken:
		problem = fmt.Sprintf("attestation %s/%s is not supported; use Builtin/JoinToken, Builtin/TPM or SPIRE/JoinToken", a.Provider, a.Method)
	case a.Provider == "" || a.Provider == bootstrapv1.IdentityBuiltin:
		return ctrl.Result{}, true
	case a.Provider != bootstrapv1.IdentitySPIRE:
		problem = fmt.Sprintf("unknown attestation provider %q", a.Provider)
	case r.SPIREProvisioner == nil || r.SPIREServerAddress == "":
		problem = "attestation provider SPIRE is not enabled on this manager"
	case !r.ownSPIREServer(a.SPIREServerAddress):
		setDataSecretCondition(c, metav1.ConditionFalse, bootstrapv1.SPIREServerNotAllowedReason, fmt.Sprintf(
			"spireServerAddress %q is not this manager's SPIRE server; leave it empty or use %s", a.SPIREServerAddress,
			strings.Join(r.ownSPIREAddresses(), " or ")))
		return ctrl.Result{}, false
	case r.spireAgentServerAddress(c) == "":
		problem = fmt.Sprintf("spireServerAddress %s is the SPIRE server's local admin socket, which VMs cannot reach; "+
			"set the manager's SPIRE agent server address (host:port) for them", a.SPIREServerAddress)
	default:
		_, _, err := bootstrap.SplitSPIREServerAddress(r.spireAgentServerAddress(c))
		if err == nil {
			return ctrl.Result{}, true
		}
		problem = err.Error()
	}
	setDataSecretCondition(c, metav1.ConditionFalse, bootstrapv1.JoinTokenFailedReason, problem)
	return ctrl.Result{}, false
}

// provisionerFor picks the identity provider of c: builtin unless it asks for SPIRE.
func (r *Reconciler) provisionerFor(ctx context.Context, c *bootstrapv1.BootstrapConfig) (identity.Provisioner, error) {
	if !isSPIRE(c) {
		return r.Provisioner, nil
	}
	// Always the manager's own server, whatever the config says: checkAttestationSupported refused
	// configs naming another before anything was minted, and what was minted lives there.
	p, err := r.SPIREProvisioner(ctx, r.SPIREServerAddress)
	if err != nil {
		return nil, fmt.Errorf("SPIRE server %s: %w", r.SPIREServerAddress, err)
	}
	return p, nil
}

// needsOperator tells errors that only a change of the spec or of the identity provider's own
// configuration can cure, such as a SPIRE server serving another trust domain or refusing HyperFleet
// as an admin, from those worth retrying with backoff.
func needsOperator(err error) bool {
	return errors.Is(err, spire.ErrTrustDomainMismatch) || errors.Is(err, spire.ErrPermissionDenied) || errors.Is(err, spire.ErrRejected)
}

// staleCopy tells whether the API server holds a newer version of c than the cache gave this
// reconcile: one that may already have minted the credential and written the data Secret.
func (r *Reconciler) staleCopy(ctx context.Context, c *bootstrapv1.BootstrapConfig) (bool, error) {
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	live := &bootstrapv1.BootstrapConfig{}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(c), live); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if live.ResourceVersion != c.ResourceVersion {
		ctrl.LoggerFrom(ctx).V(1).Info("cached copy is stale; waiting for the newer version before minting a credential",
			"cached", c.ResourceVersion, "live", live.ResourceVersion)
		return true, nil
	}
	return false, nil
}

func isSPIRE(c *bootstrapv1.BootstrapConfig) bool {
	return c.Spec.Attestation.Provider == bootstrapv1.IdentitySPIRE
}

// spireAgentServerAddress is the host:port a VM's spire-agent dials: spireServerAddress itself
// when it is a host:port (one of the manager's own), else the manager's agent address, else its
// admin address when that is a host:port.
func (r *Reconciler) spireAgentServerAddress(c *bootstrapv1.BootstrapConfig) string {
	for _, addr := range []string{c.Spec.Attestation.SPIREServerAddress, r.SPIREAgentServerAddress, r.SPIREServerAddress} {
		if addr != "" && !strings.HasPrefix(addr, "unix:") {
			return addr
		}
	}
	return ""
}

// ownSPIREAddresses are the addresses of the manager's own SPIRE server in its settings.
func (r *Reconciler) ownSPIREAddresses() []string {
	var own []string
	for _, addr := range []string{r.SPIREServerAddress, r.SPIREAgentServerAddress} {
		if addr != "" {
			own = append(own, addr)
		}
	}
	return own
}

// ownSPIREServer tells whether a config's spireServerAddress names the manager's own SPIRE server.
func (r *Reconciler) ownSPIREServer(address string) bool {
	return address == "" || slices.Contains(r.ownSPIREAddresses(), address)
}

// recordCredential persists the token's hash, SPIFFE ID and expiry before the token leaves.
// The optimistic lock makes a reconcile on a stale copy fail instead of replacing a newer token.
func (r *Reconciler) recordCredential(ctx context.Context, c *bootstrapv1.BootstrapConfig, cred identity.Credential) error {
	before := c.DeepCopy()
	c.Status.SPIFFEID = cred.ID.String()
	c.Status.TokenExpirationTime = ptr.To(metav1.NewTime(cred.ExpiresAt))
	c.Status.JoinToken = nil
	if cred.TokenHash != "" {
		c.Status.JoinToken = &bootstrapv1.JoinTokenStatus{SHA256: cred.TokenHash}
	}
	if err := r.Client.Status().Patch(ctx, c, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return err
	}
	// The reconcile's patch helper diffs c against the copy read at its start, so a new
	// resourceVersion in c ends up in its spec and status patches as a precondition; its
	// conditions patch, issued first, has moved the object on by then, and both would fail with a
	// conflict. The fields just written stay in c; the status patch repeats them harmlessly.
	c.ResourceVersion = before.ResourceVersion
	return nil
}

// writeDataSecret creates the data Secret, named like the BootstrapConfig so clusterctl move can
// recreate it, and owned by it so it goes when the config goes. A Secret left by an earlier,
// interrupted attempt carries a token whose hash was just replaced; it is overwritten.
func (r *Reconciler) writeDataSecret(ctx context.Context, s *bootstrapScope, userData string) error {
	c := s.config
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: c.Name, Namespace: c.Namespace,
			Labels: map[string]string{clusterv1.ClusterNameLabel: s.cluster.Name},
		},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{"value": []byte(userData), "format": []byte(bootstrap.Format)},
	}
	if h := recordedTokenHash(c); h != "" {
		secret.Annotations = map[string]string{bootstrapv1.JoinTokenHashAnnotation: h}
	}
	if err := controllerutil.SetControllerReference(c, secret, r.Client.Scheme()); err != nil {
		return err
	}
	err := r.Client.Create(ctx, secret)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	existing := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(secret), existing); err != nil {
		return err
	}
	if !metav1.IsControlledBy(existing, c) {
		return fmt.Errorf("secret %s exists and is not controlled by this BootstrapConfig", c.Name)
	}
	existing.Labels, existing.Data = secret.Labels, secret.Data
	if existing.Annotations == nil {
		existing.Annotations = map[string]string{}
	}
	delete(existing.Annotations, bootstrapv1.JoinTokenHashAnnotation)
	for k, v := range secret.Annotations {
		existing.Annotations[k] = v
	}
	return r.Client.Update(ctx, existing)
}

// addRunnerPool fills in the platform and labels of the Machine's RunnerPool, if it has one. They
// are informational for the agent (the runner config carries them), so a missing pool is no error.
func (r *Reconciler) addRunnerPool(ctx context.Context, m *clusterv1.Machine, in *bootstrap.Input) {
	in.Platform = string(platform.KindGitHub) // a Machine of no pool: the image's default runner
	name := m.Labels[fleetv1.RunnerPoolNameLabel]
	if name == "" {
		return
	}
	pool := &fleetv1.RunnerPool{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: name}, pool); err != nil {
		ctrl.LoggerFrom(ctx).V(1).Info("RunnerPool not readable; rendering without its labels", "pool", name, "err", err.Error())
		return
	}
	p, ok := platform.PoolOf(pool)
	if !ok {
		return
	}
	in.Platform, in.Labels = string(p.Kind), p.Labels
}

func (r *Reconciler) trustDomain(c *bootstrapv1.BootstrapConfig) string {
	switch {
	case c.Spec.Attestation.TrustDomain != "":
		return c.Spec.Attestation.TrustDomain
	case r.TrustDomain != "":
		return r.TrustDomain
	}
	return identity.DefaultTrustDomain
}

func (r *Reconciler) serviceURL(c *bootstrapv1.BootstrapConfig) string {
	switch {
	case c.Spec.BootstrapServiceURL != "":
		return c.Spec.BootstrapServiceURL
	case isSPIRE(c):
		return r.SPIREServiceURL
	}
	return r.ServiceURL
}

func markDataSecretCreated(c *bootstrapv1.BootstrapConfig) {
	c.Status.DataSecretName = ptr.To(c.Name)
	c.Status.Initialization = &bootstrapv1.BootstrapConfigInitializationStatus{DataSecretCreated: ptr.To(true)}
	setDataSecretCondition(c, metav1.ConditionTrue, bootstrapv1.DataSecretCreatedReason, "")
}

func dataSecretCreated(c *bootstrapv1.BootstrapConfig) bool {
	return c.Status.Initialization != nil && ptr.Deref(c.Status.Initialization.DataSecretCreated, false)
}

func setDataSecretCondition(c *bootstrapv1.BootstrapConfig, status metav1.ConditionStatus, reason, msg string) {
	conditions.Set(c, metav1.Condition{Type: bootstrapv1.DataSecretAvailableCondition, Status: status,
		Reason: reason, Message: msg, ObservedGeneration: c.Generation})
}

// recordedTokenHash is the SHA-256 of the join token the config recorded, "" when it has none.
func recordedTokenHash(c *bootstrapv1.BootstrapConfig) string {
	if c.Status.JoinToken == nil {
		return ""
	}
	return c.Status.JoinToken.SHA256
}
