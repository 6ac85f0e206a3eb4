package buildkite

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/tenancy"
)

// Keys of the Secrets a Buildkite pool names.
const (
	// KeyToken is the REST API access token in the pool's credentials Secret.
	KeyToken = "token"
	// DefaultCAKey is the CA bundle key when caBundleRef.key is empty.
	DefaultCAKey = "ca.crt"
)

// Driver is Buildkite's registration with pkg/platform (see pkg/platform/all).
func Driver() platform.Driver {
	return platform.Driver{
		Kind:      platform.KindBuildkite,
		NewSource: func(in platform.Inputs) (platform.Source, error) { return NewSource(in), nil },
		Webhooks:  webhookParser{},
	}
}

// webhookParser reads deliveries to /webhooks/buildkite before any pool is known.
type webhookParser struct{}

func (webhookParser) ParseWebhook(header http.Header, body, secret []byte) (platform.Webhook, error) {
	return ParseWebhook(header, body, secret)
}

// Source is the Buildkite platform.Source: it builds a Client from each pool's spec and Secrets
// and reuses it while they are unchanged, so a rotated Secret takes effect on the next call.
type Source struct {
	in platform.Inputs

	mu      sync.Mutex
	clients map[string]*pooledClient
}

// pooledClient is a client and what proving its organization last gave.
type pooledClient struct {
	*Client
	proven   time.Time
	refused  error
	refuseAt time.Time
}

// NewSource returns the Buildkite Source for a process.
func NewSource(in platform.Inputs) *Source {
	return &Source{in: in, clients: map[string]*pooledClient{}}
}

var _ platform.Source = (*Source)(nil)

// Platform returns pool's Buildkite platform and its scope (the organization).
func (s *Source) Platform(ctx context.Context, pool *fleetv1.RunnerPool) (platform.Platform, platform.Scope, error) {
	c, err := s.client(ctx, pool)
	if err != nil {
		return nil, platform.Scope{}, err
	}
	spec := pool.Spec.Platform.Buildkite
	tags, err := ParseTags(spec.Tags)
	if err != nil {
		return nil, platform.Scope{}, fmt.Errorf("%w: %v", platform.ErrInvalid, err)
	}
	p := &Platform{Client: c.Client, tags: AgentTags(queueOr(spec.Queue), tags), mark: platform.PoolRunnerLabel(string(pool.UID))}
	return p, platform.Scope{Organization: spec.Organization}, nil
}

func queueOr(q string) string {
	if q == "" {
		return DefaultQueue
	}
	return q
}

// Proof lifetimes: a proven organization is trusted for a while, and a refusal is remembered
// for a minute, so webhook routing (which asks for every delivery) costs no request per
// delivery and credentials Buildkite refuses cannot turn deliveries into calls.
const (
	ProofTTL   = 10 * time.Minute
	RefusalTTL = time.Minute
)

// Installation returns the organization slug pool's token has proven to reach: Buildkite
// answered a read of the pool's cluster in that organization with it. A slug written in a spec
// proves nothing; only Buildkite can say that the token belongs to the organization.
func (s *Source) Installation(ctx context.Context, pool *fleetv1.RunnerPool) (string, error) {
	c, err := s.client(ctx, pool)
	if err != nil {
		return "", err
	}
	now := s.in.Clock()()
	s.mu.Lock()
	proven, refused, refusedAt := c.proven, c.refused, c.refuseAt
	s.mu.Unlock()
	switch {
	case !proven.IsZero() && now.Sub(proven) < ProofTTL:
		return c.cfg.Organization, nil
	case refused != nil && now.Sub(refusedAt) < RefusalTTL:
		return "", refused
	}
	_, _, err = c.bk.Clusters.Get(ctx, c.cfg.Organization, c.cfg.ClusterID)
	err = classify("read cluster "+c.cfg.ClusterID+" of "+c.cfg.Organization, err)
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case err == nil:
		c.proven, c.refused = now, nil
		return c.cfg.Organization, nil
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || platform.IsRetryable(err):
		return "", err
	default:
		c.proven, c.refused, c.refuseAt = time.Time{}, err, now
		return "", err
	}
}

// client builds (or reuses) the client of pool's spec and Secrets.
func (s *Source) client(ctx context.Context, pool *fleetv1.RunnerPool) (*pooledClient, error) {
	spec := pool.Spec.Platform.Buildkite
	if spec == nil {
		return nil, fmt.Errorf("%w: pool %s/%s is not a Buildkite pool", platform.ErrUnsupported, pool.Namespace, pool.Name)
	}
	for _, u := range []string{spec.APIURL, spec.AgentEndpoint} {
		if platform.IsPlainHTTP(u) && !spec.AllowInsecureHTTP {
			// The API server refuses such a pool; this covers pools stored before that rule.
			return nil, fmt.Errorf("%w: %s", platform.ErrInsecureURL, u)
		}
	}
	secret, err := s.secret(ctx, pool.Namespace, spec.CredentialsRef.Name, platform.ErrCredentials)
	if err != nil {
		return nil, err
	}
	token := strings.TrimSpace(string(secret.Data[KeyToken]))
	if token == "" {
		return nil, fmt.Errorf("%w: Secret %s/%s has no key %q", platform.ErrCredentials, pool.Namespace, secret.Name, KeyToken)
	}
	var caPEM []byte
	caVersion := ""
	if ref := spec.CABundleRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = DefaultCAKey
		}
		ca, err := s.secret(ctx, pool.Namespace, ref.Name, platform.ErrCABundle)
		if err != nil {
			return nil, err
		}
		if caPEM = ca.Data[key]; len(caPEM) == 0 {
			return nil, fmt.Errorf("%w: Secret %s/%s has no key %q", platform.ErrCABundle, pool.Namespace, ref.Name, key)
		}
		caVersion = string(ca.UID) + "/" + ca.ResourceVersion + "/" + key
	}
	timeout := s.in.HTTPTimeout
	if spec.HTTPTimeout != nil {
		timeout = spec.HTTPTimeout.Duration
	}
	cacheKey := strings.Join([]string{string(secret.UID), secret.ResourceVersion, spec.Organization, spec.Cluster, spec.APIURL,
		spec.AgentEndpoint, fmt.Sprint(spec.AllowInsecureHTTP), timeout.String(), caVersion}, "|")
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[cacheKey]; ok {
		return c, nil
	}
	tr := s.in.Transport
	if caPEM != nil {
		if tr, err = platform.TransportWithCA(s.in.Transport, caPEM); err != nil {
			return nil, fmt.Errorf("Secret %s/%s: %w", pool.Namespace, spec.CABundleRef.Name, err)
		}
	}
	c, err := NewClient(Config{BaseURL: spec.APIURL, AgentEndpoint: spec.AgentEndpoint, Organization: spec.Organization,
		ClusterID: spec.Cluster, APIToken: token, AllowInsecureHTTP: spec.AllowInsecureHTTP, HTTPTimeout: timeout, Transport: tr, AgentCAPEM: caPEM})
	if err != nil {
		return nil, err
	}
	if len(s.clients) > 256 {
		s.clients = map[string]*pooledClient{} // superseded Secret versions would pile up otherwise
	}
	pc := &pooledClient{Client: c}
	s.clients[cacheKey] = pc
	return pc, nil
}

// secret reads a Secret of the pool's namespace; a missing one is class.
func (s *Source) secret(ctx context.Context, namespace, name string, class error) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	if err := s.in.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
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
