package connection

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
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

// Config is one provider kind's connection configuration, read from a HypervisorCluster and its
// Secrets.
type Config interface {
	// Hash changes whenever the client must be rebuilt (a setting or a Secret changed).
	Hash() string
	// Build constructs the client.
	Build() (hypervisor.Provider, error)
}

// ProviderBuilder reads the configuration of one kind of hypervisor. Each provider package has
// one, registered under its spec.provider value in pkg/providers: this package imports none of them.
type ProviderBuilder interface {
	// Config validates src's HypervisorCluster and reads the Secrets it needs; a user's mistake is
	// an *Error carrying the condition reason.
	Config(ctx context.Context, src Source) (Config, error)
}

// Source is a HypervisorCluster being connected, with access to the Secrets it names.
type Source struct {
	HypervisorCluster *infrav1.HypervisorCluster
	// Timeout bounds each API call of the built client.
	Timeout time.Duration
	// TaskPollInterval, when set, is how often the built client polls a task it waits for
	// itself; zero keeps the provider's default.
	TaskPollInterval time.Duration
	secrets          *secretReader
}

// Key is the HypervisorCluster's namespace/name.
func (s Source) Key() string { return Key(s.HypervisorCluster) }

// Registry hands out one provider per HypervisorCluster, built by the ProviderBuilder registered
// for its spec.provider and rebuilt whenever its configuration or credentials change. It is safe for
// concurrent use once set up.
type Registry struct {
	Reader  client.Reader
	Timeout time.Duration
	// TaskPollInterval is passed to every builder in Source; zero keeps each provider's default.
	TaskPollInterval time.Duration
	// Wrap, when set, decorates every provider built; providerLabel is spec.provider in lower case
	// (the manager adds spans and metrics this way).
	Wrap func(p hypervisor.Provider, providerLabel, cluster string) hypervisor.Provider

	builders map[infrav1.ProviderType]ProviderBuilder
	cache    *hypervisor.Cache
	secrets  *secretReader
}

// NewRegistry returns a Registry reading Secrets through reader, each reused for
// DefaultSecretTTL, with builders keyed by spec.provider (pkg/providers.Builders lists every
// provider linked into HyperFleet).
func NewRegistry(reader client.Reader, timeout time.Duration, builders map[infrav1.ProviderType]ProviderBuilder) *Registry {
	return NewRegistryWithSecretTTL(reader, timeout, DefaultSecretTTL, builders)
}

// NewRegistryWithSecretTTL is NewRegistry reusing a Secret it read for secretTTL; zero or less
// reads every time.
func NewRegistryWithSecretTTL(reader client.Reader, timeout, secretTTL time.Duration, builders map[infrav1.ProviderType]ProviderBuilder) *Registry {
	r := &Registry{Reader: reader, Timeout: timeout, cache: hypervisor.NewCache(), secrets: newSecretReader(reader, secretTTL)}
	for t, b := range builders {
		r.Register(t, b)
	}
	return r
}

// Register sets the builder of provider kind t, replacing the registered one (tests poll faster this
// way); a nil builder unregisters t. Call it before the registry is used.
func (r *Registry) Register(t infrav1.ProviderType, b ProviderBuilder) {
	if r.builders == nil {
		r.builders = map[infrav1.ProviderType]ProviderBuilder{}
	}
	if b == nil {
		delete(r.builders, t)
		return
	}
	r.builders[t] = b
}

// Key identifies a HypervisorCluster in the registry.
func Key(hc *infrav1.HypervisorCluster) string { return hc.Namespace + "/" + hc.Name }

// ProviderOf is hc's provider kind; an unset spec.provider is Proxmox, the API's default.
func ProviderOf(hc *infrav1.HypervisorCluster) infrav1.ProviderType {
	if hc.Spec.Provider == "" {
		return infrav1.ProviderProxmox
	}
	return hc.Spec.Provider
}

// Get returns the provider for hc, building it if the configuration or a Secret changed.
func (r *Registry) Get(ctx context.Context, hc *infrav1.HypervisorCluster) (hypervisor.Provider, error) {
	kind := ProviderOf(hc)
	b, ok := r.builders[kind]
	if !ok {
		return nil, &Error{Reason: infrav1.HypervisorClusterUnsupportedProviderReason,
			Message: fmt.Sprintf("provider %q is not supported by this manager; supported: %s", kind, r.supported())}
	}
	if hc.Spec.InstallationID == "" {
		// Without its identity a provider could not tell this installation's VMs from another's.
		return nil, &Error{Reason: infrav1.HypervisorClusterIdentityPendingReason,
			Message: fmt.Sprintf("HypervisorCluster %s has no installation ID yet", Key(hc))}
	}
	cfg, err := b.Config(ctx, Source{HypervisorCluster: hc, Timeout: r.Timeout, TaskPollInterval: r.TaskPollInterval, secrets: r.secretReader()})
	if err != nil {
		return nil, err
	}
	p, err := r.cache.Get(Key(hc), string(kind)+"\x00"+cfg.Hash(), func() (hypervisor.Provider, error) {
		p, err := cfg.Build()
		if err != nil || r.Wrap == nil {
			return p, err
		}
		return r.Wrap(p, strings.ToLower(string(kind)), Key(hc)), nil
	})
	if err != nil {
		return nil, &Error{Reason: infrav1.HypervisorClusterCredentialsInvalidReason, Message: err.Error(), Err: err}
	}
	return p, nil
}

func (r *Registry) supported() string {
	kinds := make([]string, 0, len(r.builders))
	for k := range r.builders {
		kinds = append(kinds, string(k))
	}
	if len(kinds) == 0 {
		return "none"
	}
	slices.Sort(kinds)
	return strings.Join(kinds, ", ")
}

// secretReader is the registry's Secret reader; a Registry built as a literal reads every time.
func (r *Registry) secretReader() *secretReader {
	if r.secrets == nil {
		return newSecretReader(r.Reader, 0)
	}
	return r.secrets
}

// Forget drops the cached provider of a deleted HypervisorCluster.
func (r *Registry) Forget(key string) { r.cache.Delete(key) }

// Credentials reads the credentials Secret spec.credentialsRef names.
func (s Source) Credentials(ctx context.Context) (*corev1.Secret, error) {
	hc := s.HypervisorCluster
	creds := &corev1.Secret{}
	if err := s.secrets.Get(ctx, client.ObjectKey{Namespace: hc.Namespace, Name: hc.Spec.CredentialsRef.Name}, creds); err != nil {
		if err := tenancy.Check(err, hc.Namespace); errors.Is(err, tenancy.ErrNamespaceNotEnabled) {
			return nil, &Error{Reason: infrav1.NamespaceNotEnabledReason, Message: err.Error(), Err: err}
		}
		if apierrors.IsNotFound(err) {
			return nil, &Error{Reason: infrav1.HypervisorClusterCredentialsNotFoundReason,
				Message: fmt.Sprintf("credentials Secret %s/%s not found", hc.Namespace, hc.Spec.CredentialsRef.Name), Err: err}
		}
		return nil, err
	}
	return creds, nil
}

// CABundle returns the PEM bundle caBundleRef points at, or nil when it is unset.
func (s Source) CABundle(ctx context.Context) ([]byte, error) {
	hc := s.HypervisorCluster
	ref := hc.Spec.CABundleRef
	if ref == nil {
		return nil, nil
	}
	key := ref.Key
	if key == "" {
		key = DefaultCAKey
	}
	ca := &corev1.Secret{}
	if err := s.secrets.Get(ctx, client.ObjectKey{Namespace: hc.Namespace, Name: ref.Name}, ca); err != nil {
		if err := tenancy.Check(err, hc.Namespace); errors.Is(err, tenancy.ErrNamespaceNotEnabled) {
			return nil, &Error{Reason: infrav1.NamespaceNotEnabledReason, Message: err.Error(), Err: err}
		}
		if apierrors.IsNotFound(err) {
			return nil, &Error{Reason: infrav1.HypervisorClusterCABundleNotFoundReason,
				Message: fmt.Sprintf("CA bundle Secret %s/%s not found", hc.Namespace, ref.Name), Err: err}
		}
		return nil, err
	}
	if len(ca.Data[key]) == 0 {
		return nil, &Error{Reason: infrav1.HypervisorClusterCABundleNotFoundReason,
			Message: fmt.Sprintf("CA bundle Secret %s/%s has no key %q", hc.Namespace, ref.Name, key)}
	}
	return ca.Data[key], nil
}
