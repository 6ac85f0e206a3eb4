package buildkite

import (
	"context"
	"fmt"
	"net/http"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Keys of the Secrets a Buildkite pool names.
const (
	// KeyToken is the REST API access token in the pool's credentials Secret.
	KeyToken = "token"
	// DefaultCAKey is the CA bundle key when caBundleRef.key is empty.
	DefaultCAKey = platform.DefaultCAKey
)

// Driver is Buildkite's registration with pkg/platform (see pkg/platform/all).
func Driver() platform.Driver {
	return platform.Driver{
		Kind:      platform.KindBuildkite,
		NewSource: func(in platform.Inputs) (platform.Source, error) { return NewSource(in), nil },
		Webhooks:  webhookParser{},
		WebhookSecret: platform.Setting{Flag: "buildkite-webhook-secret", Env: "BUILDKITE_WEBHOOK_SECRET",
			Usage: "Buildkite webhook token or signature key for /webhooks/buildkite (prefer the environment variable); the route refuses every delivery without it"},
		CheckDelivery: checkDelivery,
	}
}

// checkDelivery: a signature covers the body, as GitHub's does, and is preferred when both are
// sent (as the parser does); a token alone is verified from the headers.
func checkDelivery(header http.Header, secret []byte) (bool, error) {
	if header.Get(HeaderSignature) != "" {
		return false, nil
	}
	if !platform.TokenMatches(header.Get(HeaderToken), secret) {
		return false, fmt.Errorf("%w: neither %s nor a matching %s", platform.ErrInvalidSignature, HeaderSignature, HeaderToken)
	}
	return true, nil
}

// webhookParser reads deliveries to /webhooks/buildkite before any pool is known.
type webhookParser struct{}

func (webhookParser) ParseWebhook(header http.Header, body, secret []byte) (platform.Webhook, error) {
	return ParseWebhook(header, body, secret)
}

// Source is the Buildkite platform.Source: it builds a Client from each pool's spec and Secrets
// and reuses it while they are unchanged, so a rotated Secret takes effect on the next call.
type Source struct {
	in      platform.Inputs
	clients platform.ClientCache[*pooledClient]
}

// pooledClient is a client and what proving its organization last gave.
type pooledClient struct {
	*Client
	proof platform.Proof
}

// NewSource returns the Buildkite Source for a process.
func NewSource(in platform.Inputs) *Source {
	return &Source{in: in}
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

// Installation returns the organization slug pool's token has proven to reach: Buildkite
// answered a read of the pool's cluster in that organization with it. A slug written in a spec
// proves nothing; only Buildkite can say that the token belongs to the organization. A proof
// stands for platform.ProofTTL and a refusal for platform.RefusalTTL.
func (s *Source) Installation(ctx context.Context, pool *fleetv1.RunnerPool) (string, error) {
	c, err := s.client(ctx, pool)
	if err != nil {
		return "", err
	}
	if err := c.proof.Check(s.in.Clock()(), func() error {
		_, _, err := c.bk.Clusters.Get(ctx, c.cfg.Organization, c.cfg.ClusterID)
		return classify("read cluster "+c.cfg.ClusterID+" of "+c.cfg.Organization, err)
	}); err != nil {
		return "", err
	}
	return c.cfg.Organization, nil
}

// client builds (or reuses) the client of pool's spec and Secrets.
func (s *Source) client(ctx context.Context, pool *fleetv1.RunnerPool) (*pooledClient, error) {
	spec := pool.Spec.Platform.Buildkite
	if spec == nil {
		return nil, fmt.Errorf("%w: pool %s/%s is not a Buildkite pool", platform.ErrUnsupported, pool.Namespace, pool.Name)
	}
	secrets, err := platform.PoolConnection{Namespace: pool.Namespace, URLs: []string{spec.APIURL, spec.AgentEndpoint},
		AllowInsecureHTTP: spec.AllowInsecureHTTP, InsecureURL: platform.ErrInsecureURL,
		Credentials: spec.CredentialsRef.Name, CredentialsClass: platform.ErrCredentials, TokenKey: KeyToken,
		CABundleRef: spec.CABundleRef}.Read(ctx, s.in.Reader)
	if err != nil {
		return nil, err
	}
	timeout := platform.HTTPTimeout(spec.HTTPTimeout, s.in.HTTPTimeout)
	secret := secrets.Credentials
	cacheKey := platform.ClientKey(string(secret.UID), secret.ResourceVersion, spec.Organization, spec.Cluster, spec.APIURL,
		spec.AgentEndpoint, fmt.Sprint(spec.AllowInsecureHTTP), timeout.String(), secrets.CAVersion)
	return s.clients.Get(cacheKey, func() (*pooledClient, error) {
		tr, err := secrets.Transport(s.in.Transport)
		if err != nil {
			return nil, fmt.Errorf("Secret %s/%s: %w", pool.Namespace, spec.CABundleRef.Name, err)
		}
		c, err := NewClient(Config{BaseURL: spec.APIURL, AgentEndpoint: spec.AgentEndpoint, Organization: spec.Organization,
			ClusterID: spec.Cluster, APIToken: secrets.Token, AllowInsecureHTTP: spec.AllowInsecureHTTP, HTTPTimeout: timeout, Transport: tr, AgentCAPEM: secrets.CAPEM})
		if err != nil {
			return nil, err
		}
		return &pooledClient{Client: c}, nil
	})
}
