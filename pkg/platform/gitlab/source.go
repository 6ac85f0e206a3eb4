package gitlab

import (
	"context"
	"fmt"
	"net/http"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Keys of the Secrets a GitLab pool names.
const (
	// KeyToken is the access token in the pool's credentials Secret.
	KeyToken = "token"
	// DefaultCAKey is the CA bundle key when caBundleRef.key is empty.
	DefaultCAKey = platform.DefaultCAKey
)

// Driver is GitLab's registration with pkg/platform: a Source built from the process's inputs,
// and the Job Hook parser of /webhooks/gitlab.
func Driver() platform.Driver {
	return platform.Driver{
		Kind:      platform.KindGitLab,
		NewSource: func(in platform.Inputs) (platform.Source, error) { return NewSource(in), nil },
		Webhooks:  webhookParser{},
		WebhookSecret: platform.Setting{Flag: "gitlab-webhook-secret", Env: "GITLAB_WEBHOOK_SECRET",
			Usage: "X-Gitlab-Token of GitLab's job webhooks for /webhooks/gitlab (prefer the environment variable); the route refuses every delivery without it"},
		CheckDelivery: checkDelivery,
	}
}

// checkDelivery: GitLab sends the secret itself, so the delivery is verified in full from its
// headers.
func checkDelivery(header http.Header, secret []byte) (bool, error) {
	if !platform.TokenMatches(header.Get(HeaderToken), secret) {
		return false, fmt.Errorf("%w: %s is missing or wrong", platform.ErrInvalidSignature, HeaderToken)
	}
	return true, nil
}

// webhookParser reads deliveries to /webhooks/gitlab before any pool is known.
type webhookParser struct{}

func (webhookParser) ParseWebhook(header http.Header, body, secret []byte) (platform.Webhook, error) {
	return ParseWebhook(header, body, secret)
}

// Source is the GitLab platform.Source: it builds a Client from each pool's spec and Secrets
// and reuses it while they are unchanged, so a rotated Secret takes effect on the next call.
type Source struct {
	in      platform.Inputs
	clients platform.ClientCache[*pooledClient]
}

// pooledClient is a client and what proving its scope last gave.
type pooledClient struct {
	*Client
	proof platform.Proof
}

// NewSource returns the GitLab Source for a process.
func NewSource(in platform.Inputs) *Source {
	return &Source{in: in}
}

var _ platform.Source = (*Source)(nil)

// scopeOfPool is the pool's scope in neutral terms.
func scopeOfPool(spec *fleetv1.GitLabSpec) platform.Scope {
	return platform.Scope{Instance: spec.Scope.Instance, Organization: spec.Scope.Group, Repository: spec.Scope.Project}.Effective()
}

// Platform returns pool's GitLab platform and its scope (instance, group or project).
func (s *Source) Platform(ctx context.Context, pool *fleetv1.RunnerPool) (platform.Platform, platform.Scope, error) {
	c, err := s.client(ctx, pool)
	if err != nil {
		return nil, platform.Scope{}, err
	}
	spec := pool.Spec.Platform.GitLab
	scope := scopeOfPool(spec)
	if err := scopeOf(scope).Validate(); err != nil {
		return nil, platform.Scope{}, fmt.Errorf("%w: %v", platform.ErrInvalid, err)
	}
	p := &Platform{Client: c.Client, mark: platform.PoolRunnerLabel(string(pool.UID)), settings: RunnerSettings{
		Tags: platform.NormalizeLabels(spec.Tags), RunUntagged: spec.RunUntagged, AccessLevel: string(spec.AccessLevel)}}
	return p, scope, nil
}

// Installation returns the host of the instance pool's token has proven to act on: GitLab
// answered a listing of the runners of the pool's project, group or instance with it. A URL
// written in a spec proves nothing; only GitLab can say that the token reaches the scope. A
// proof stands for platform.ProofTTL and a refusal for platform.RefusalTTL.
func (s *Source) Installation(ctx context.Context, pool *fleetv1.RunnerPool) (string, error) {
	c, err := s.client(ctx, pool)
	if err != nil {
		return "", err
	}
	scope := scopeOf(scopeOfPool(pool.Spec.Platform.GitLab))
	if err := c.proof.Check(s.in.Clock()(), func() error {
		_, err := c.Runners(ctx, scope, platform.PoolRunnerLabel(string(pool.UID)))
		return err
	}); err != nil {
		return "", err
	}
	return c.Host(), nil
}

// client builds (or reuses) the client of pool's spec and Secrets. The scope is part of the
// client's key, so a proof made for one scope never vouches for another.
func (s *Source) client(ctx context.Context, pool *fleetv1.RunnerPool) (*pooledClient, error) {
	spec := pool.Spec.Platform.GitLab
	if spec == nil {
		return nil, fmt.Errorf("%w: pool %s/%s is not a GitLab pool", platform.ErrUnsupported, pool.Namespace, pool.Name)
	}
	secrets, err := platform.PoolConnection{Namespace: pool.Namespace, URLs: []string{spec.URL},
		AllowInsecureHTTP: spec.AllowInsecureHTTP, InsecureURL: platform.ErrInsecureURL,
		Credentials: spec.CredentialsRef.Name, CredentialsClass: platform.ErrCredentials, TokenKey: KeyToken,
		CABundleRef: spec.CABundleRef}.Read(ctx, s.in.Reader)
	if err != nil {
		return nil, err
	}
	timeout := platform.HTTPTimeout(spec.HTTPTimeout, s.in.HTTPTimeout)
	secret := secrets.Credentials
	key := platform.ClientKey(append([]string{string(secret.UID), secret.ResourceVersion, spec.URL,
		fmt.Sprint(spec.AllowInsecureHTTP), timeout.String(), secrets.CAVersion}, platform.ScopeKey(scopeOfPool(spec))...)...)
	return s.clients.Get(key, func() (*pooledClient, error) {
		tr, err := secrets.Transport(s.in.Transport)
		if err != nil {
			return nil, fmt.Errorf("Secret %s/%s: %w", pool.Namespace, spec.CABundleRef.Name, err)
		}
		c, err := NewClient(Config{URL: spec.URL, Token: secrets.Token, AllowInsecureHTTP: spec.AllowInsecureHTTP, HTTPTimeout: timeout,
			Transport: tr, CAPEM: secrets.CAPEM})
		if err != nil {
			return nil, err
		}
		return &pooledClient{Client: c}, nil
	})
}
