package connection

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/proxmox"
	"github.com/hyperfleet-io/hyperfleet/pkg/tenancy"
)

// Secret keys of the credentials Secret.
const (
	KeyTokenID     = "token_id"
	KeyTokenSecret = "token_secret"
	KeyUsername    = "username"
	KeyPassword    = "password"
	// DefaultCAKey is the CA bundle key when caBundleRef.key is empty.
	DefaultCAKey = "ca.crt"
)

// Error is a failure to build a connection, with the condition reason it maps to.
type Error struct {
	Reason  string
	Message string
	Err     error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.Err }

// ReasonOf returns the condition reason of err: the connection Error's, or a reason derived from the
// hypervisor error class.
func ReasonOf(err error) string {
	var ce *Error
	if errors.As(err, &ce) {
		return ce.Reason
	}
	switch {
	case isTLSError(err):
		return infrav1.HypervisorClusterTLSErrorReason
	case errors.Is(err, hypervisor.ErrUnauthorized):
		return infrav1.HypervisorClusterUnauthorizedReason
	case errors.Is(err, hypervisor.ErrForbidden):
		return infrav1.HypervisorClusterForbiddenReason
	}
	return infrav1.HypervisorClusterUnreachableReason
}

func isTLSError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "x509:") || strings.Contains(s, "tls:") || strings.Contains(s, "certificate")
}

// Builder constructs a provider from a Proxmox configuration; tests and future providers swap it.
type Builder func(cfg proxmox.Config) (hypervisor.Provider, error)

// DefaultBuilder builds the go-proxmox implementation.
func DefaultBuilder(cfg proxmox.Config) (hypervisor.Provider, error) { return proxmox.New(cfg) }

// Registry hands out one provider per HypervisorCluster, rebuilt whenever its configuration or
// credentials change. It is safe for concurrent use.
type Registry struct {
	Reader  client.Reader
	Build   Builder
	Timeout time.Duration

	cache *hypervisor.Cache
}

// NewRegistry returns a Registry reading Secrets through reader.
func NewRegistry(reader client.Reader, timeout time.Duration) *Registry {
	return &Registry{Reader: reader, Build: DefaultBuilder, Timeout: timeout, cache: hypervisor.NewCache()}
}

// Key identifies a HypervisorCluster in the registry.
func Key(hc *infrav1.HypervisorCluster) string { return hc.Namespace + "/" + hc.Name }

// Get returns the provider for hc, building it if the configuration or a Secret changed.
func (r *Registry) Get(ctx context.Context, hc *infrav1.HypervisorCluster) (hypervisor.Provider, error) {
	if hc.Spec.Provider != "" && hc.Spec.Provider != infrav1.ProviderProxmox {
		return nil, &Error{Reason: infrav1.HypervisorClusterUnsupportedProviderReason,
			Message: fmt.Sprintf("provider %q is not supported; use Proxmox", hc.Spec.Provider)}
	}
	cfg, err := r.config(ctx, hc)
	if err != nil {
		return nil, err
	}
	build := r.Build
	if build == nil {
		build = DefaultBuilder
	}
	p, err := r.cache.Get(Key(hc), cfg.Hash(), func() (hypervisor.Provider, error) { return build(cfg) })
	if err != nil {
		return nil, &Error{Reason: infrav1.HypervisorClusterCredentialsInvalidReason, Message: err.Error(), Err: err}
	}
	return p, nil
}

// Forget drops the cached provider of a deleted HypervisorCluster.
func (r *Registry) Forget(key string) { r.cache.Delete(key) }

func (r *Registry) config(ctx context.Context, hc *infrav1.HypervisorCluster) (proxmox.Config, error) {
	cfg := proxmox.Config{
		Endpoint:           hc.Spec.Endpoint,
		InsecureSkipVerify: hc.Spec.InsecureSkipTLSVerify,
		AllowInsecureHTTP:  hc.Spec.AllowInsecureHTTP,
		Timeout:            r.Timeout,
		Cluster:            Key(hc),
		InstallationID:     hc.Spec.InstallationID,
		AllowedNodes:       hc.Spec.AllowedNodes,
	}
	if cfg.InstallationID == "" {
		// Without its identity a provider could not tell this installation's VMs from another's.
		return cfg, &Error{Reason: infrav1.HypervisorClusterIdentityPendingReason,
			Message: fmt.Sprintf("HypervisorCluster %s has no installation ID yet", Key(hc))}
	}
	if p := hc.Spec.Proxmox; p != nil {
		cfg.ISOStorage = p.ISOStorage
		if p.CloudInitDelivery == infrav1.CloudInitSnippets {
			return cfg, &Error{Reason: infrav1.HypervisorClusterUnsupportedSettingReason,
				Message: "cloudInitDelivery Snippets is not supported yet: the Proxmox API cannot upload snippets; use ISO"}
		}
	}
	creds := &corev1.Secret{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: hc.Namespace, Name: hc.Spec.CredentialsRef.Name}, creds); err != nil {
		if err := tenancy.Check(err, hc.Namespace); errors.Is(err, tenancy.ErrNamespaceNotEnabled) {
			return cfg, &Error{Reason: infrav1.NamespaceNotEnabledReason, Message: err.Error(), Err: err}
		}
		if apierrors.IsNotFound(err) {
			return cfg, &Error{Reason: infrav1.HypervisorClusterCredentialsNotFoundReason,
				Message: fmt.Sprintf("credentials Secret %s/%s not found", hc.Namespace, hc.Spec.CredentialsRef.Name), Err: err}
		}
		return cfg, err
	}
	d := creds.Data
	switch {
	case len(d[KeyTokenID]) > 0 && len(d[KeyTokenSecret]) > 0:
		cfg.TokenID, cfg.TokenSecret = strings.TrimSpace(string(d[KeyTokenID])), strings.TrimSpace(string(d[KeyTokenSecret]))
	case len(d[KeyUsername]) > 0 && len(d[KeyPassword]) > 0:
		cfg.Username, cfg.Password = strings.TrimSpace(string(d[KeyUsername])), string(d[KeyPassword])
	default:
		return cfg, &Error{Reason: infrav1.HypervisorClusterCredentialsInvalidReason,
			Message: fmt.Sprintf("credentials Secret %s/%s needs keys %s and %s, or %s and %s",
				hc.Namespace, creds.Name, KeyTokenID, KeyTokenSecret, KeyUsername, KeyPassword)}
	}
	if ref := hc.Spec.CABundleRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = DefaultCAKey
		}
		ca := &corev1.Secret{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: hc.Namespace, Name: ref.Name}, ca); err != nil {
			if err := tenancy.Check(err, hc.Namespace); errors.Is(err, tenancy.ErrNamespaceNotEnabled) {
				return cfg, &Error{Reason: infrav1.NamespaceNotEnabledReason, Message: err.Error(), Err: err}
			}
			if apierrors.IsNotFound(err) {
				return cfg, &Error{Reason: infrav1.HypervisorClusterCABundleNotFoundReason,
					Message: fmt.Sprintf("CA bundle Secret %s/%s not found", hc.Namespace, ref.Name), Err: err}
			}
			return cfg, err
		}
		if len(ca.Data[key]) == 0 {
			return cfg, &Error{Reason: infrav1.HypervisorClusterCABundleNotFoundReason,
				Message: fmt.Sprintf("CA bundle Secret %s/%s has no key %q", hc.Namespace, ref.Name, key)}
		}
		cfg.CABundle = ca.Data[key]
	}
	return cfg, nil
}
