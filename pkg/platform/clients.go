package platform

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/tenancy"
)

// DefaultCAKey is the key a pool's caBundleRef reads when it names none.
const DefaultCAKey = "ca.crt"

// Proof lifetimes: a pool's proven credentials are trusted for ProofTTL, and a refusal is
// remembered for RefusalTTL, so webhook routing (which asks for every delivery) costs no request
// per delivery and credentials a platform refuses cannot turn deliveries into calls.
const (
	ProofTTL   = 10 * time.Minute
	RefusalTTL = time.Minute
)

// Proof remembers what proving one client's credentials against its platform last gave.
type Proof struct {
	mu        sync.Mutex
	proven    time.Time
	refused   error
	refusedAt time.Time
}

// Check returns nil while a success younger than ProofTTL stands, the refusal while one younger
// than RefusalTTL does, and otherwise calls prove: its success is remembered, and so is a
// definite refusal; a cancelled call or a retryable error (a timeout, a 5xx, a rate limit) is
// returned but not remembered.
func (p *Proof) Check(now time.Time, prove func() error) error {
	p.mu.Lock()
	proven, refused, refusedAt := p.proven, p.refused, p.refusedAt
	p.mu.Unlock()
	switch {
	case !proven.IsZero() && now.Sub(proven) < ProofTTL:
		return nil
	case refused != nil && now.Sub(refusedAt) < RefusalTTL:
		return refused
	}
	err := prove()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err == nil:
		p.proven, p.refused = now, nil
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || IsRetryable(err):
	default:
		p.proven, p.refused, p.refusedAt = time.Time{}, err, now
	}
	return err
}

// ClientKey joins what a client is built from into its ClientCache key. Each part is prefixed
// with its length, so two different lists of parts never give one key whatever they contain: a
// URL may hold any separator, and two pools whose settings differ only in where one ends and
// the next begins must not share a client (and its proof).
func ClientKey(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
		b.WriteByte('|')
	}
	return b.String()
}

// ScopeKey is the parts of a ClientKey that name a scope: its kind and its path, so that a group
// and a project of the same path are different scopes.
func ScopeKey(s Scope) []string {
	s = s.Effective()
	return []string{s.Repository, s.Organization, strconv.FormatBool(s.Instance)}
}

// maxCachedClients bounds a ClientCache: superseded Secret versions would pile up otherwise.
const maxCachedClients = 256

// ClientCache keeps one client per key (a key names everything the client is built from: the
// Secrets' versions and the pool's settings), so a rotated Secret builds a new client on the
// next call and an unchanged one reuses its connections and proof.
type ClientCache[C any] struct {
	mu sync.Mutex
	m  map[string]C
}

// Get returns the client of key, building it with build the first time.
func (c *ClientCache[C]) Get(key string, build func() (C, error)) (C, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cl, ok := c.m[key]; ok {
		return cl, nil
	}
	cl, err := build()
	if err != nil {
		return cl, err
	}
	if c.m == nil || len(c.m) >= maxCachedClients {
		c.m = map[string]C{}
	}
	c.m[key] = cl
	return cl, nil
}

// ReadSecret reads a Secret of a pool's namespace. A missing Secret is an error of class
// (ErrCredentials, ErrCABundle); a namespace not enabled for HyperFleet is tenancy's error.
func ReadSecret(ctx context.Context, r client.Reader, namespace, name string, class error) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		if err := tenancy.Check(err, namespace); errors.Is(err, tenancy.ErrNamespaceNotEnabled) {
			return nil, err
		}
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: Secret %s/%s not found", class, namespace, name)
		}
		return nil, err
	}
	return secret, nil
}

// ReadCABundle reads the CA bundle ref names in namespace (nil ref: none) and checks it parses;
// version changes whenever the Secret does. Its errors match ErrCABundle.
func ReadCABundle(ctx context.Context, r client.Reader, namespace string, ref *fleetv1.SecretKeyReference) (caPEM []byte, version string, err error) {
	if ref == nil {
		return nil, "", nil
	}
	key := ref.Key
	if key == "" {
		key = DefaultCAKey
	}
	secret, err := ReadSecret(ctx, r, namespace, ref.Name, ErrCABundle)
	if err != nil {
		return nil, "", err
	}
	if caPEM = secret.Data[key]; len(caPEM) == 0 {
		return nil, "", fmt.Errorf("%w: Secret %s/%s has no key %q", ErrCABundle, namespace, ref.Name, key)
	}
	if _, err := ParseCABundle(caPEM); err != nil {
		return nil, "", fmt.Errorf("Secret %s/%s key %q: %w", namespace, ref.Name, key, err)
	}
	return caPEM, string(secret.UID) + "/" + secret.ResourceVersion + "/" + key, nil
}

// PoolConnection is the platform-neutral part of a pool's spec.platform.<name>: where its
// credentials are sent and the Secrets it names. Each platform's Source fills it from its own
// spec, with its own error classes, and reads it with Read.
type PoolConnection struct {
	// Namespace is the pool's namespace, which holds its Secrets.
	Namespace string
	// URLs are the endpoints the credentials are sent to, as set in the spec (empty: the
	// platform's https:// default).
	URLs []string
	// AllowInsecureHTTP is the spec's allowInsecureHTTP.
	AllowInsecureHTTP bool
	// InsecureURL wraps the first http:// URL when plain HTTP is not allowed: ErrInsecureURL or a
	// platform's error that matches it.
	InsecureURL error
	// Credentials names the credentials Secret; a missing one is an error of CredentialsClass
	// (ErrCredentials or a platform's error that matches it).
	Credentials      string
	CredentialsClass error
	// TokenKey, when set, is the key of the credentials Secret that must hold a token (white
	// space around it is trimmed); an empty or missing one is an ErrCredentials.
	TokenKey string
	// CABundleRef is the spec's caBundleRef (nil: the system roots).
	CABundleRef *fleetv1.SecretKeyReference
}

// PoolSecrets is what a pool's Secrets give its client.
type PoolSecrets struct {
	// Credentials is the credentials Secret.
	Credentials *corev1.Secret
	// Token is the Secret's TokenKey, trimmed ("" without a TokenKey).
	Token string
	// CAPEM is the CA bundle (nil: none named) and CAVersion changes whenever its Secret does.
	CAPEM     []byte
	CAVersion string
}

// Read checks and reads c in this order, so nothing is sent to the platform unless all of it is
// usable: no endpoint may be http:// unless allowed (nothing is read then), the credentials
// Secret must exist and hold the token, and the CA bundle must exist and parse (ReadCABundle).
func (c PoolConnection) Read(ctx context.Context, r client.Reader) (PoolSecrets, error) {
	for _, u := range c.URLs {
		if IsPlainHTTP(u) && !c.AllowInsecureHTTP {
			// The API server refuses such a pool; this covers pools stored before that rule.
			return PoolSecrets{}, fmt.Errorf("%w: %s", c.InsecureURL, u)
		}
	}
	secret, err := ReadSecret(ctx, r, c.Namespace, c.Credentials, c.CredentialsClass)
	if err != nil {
		return PoolSecrets{}, err
	}
	s := PoolSecrets{Credentials: secret}
	if c.TokenKey != "" {
		if s.Token = strings.TrimSpace(string(secret.Data[c.TokenKey])); s.Token == "" {
			return PoolSecrets{}, fmt.Errorf("%w: Secret %s/%s has no key %q", ErrCredentials, c.Namespace, secret.Name, c.TokenKey)
		}
	}
	if s.CAPEM, s.CAVersion, err = ReadCABundle(ctx, r, c.Namespace, c.CABundleRef); err != nil {
		return PoolSecrets{}, err
	}
	return s, nil
}

// Transport is base when the pool names no CA bundle, and otherwise base trusting only the
// bundle (TransportWithCA), whose error is returned as it is for the platform to wrap.
func (s PoolSecrets) Transport(base http.RoundTripper) (http.RoundTripper, error) {
	if s.CAPEM == nil {
		return base, nil
	}
	tr, err := TransportWithCA(base, s.CAPEM)
	if err != nil {
		return nil, err
	}
	return tr, nil
}

// HTTPTimeout is a pool's spec httpTimeout when set, and otherwise fallback (the process's).
func HTTPTimeout(spec *metav1.Duration, fallback time.Duration) time.Duration {
	if spec != nil {
		return spec.Duration
	}
	return fallback
}
