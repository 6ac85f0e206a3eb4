package platform

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
