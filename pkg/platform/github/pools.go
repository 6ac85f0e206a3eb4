package github

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/tenancy"
)

// Keys of a RunnerPool's GitHub App credentials Secret.
const (
	KeyAppID          = "app-id"
	KeyPrivateKey     = "private-key"
	KeyInstallationID = "installation-id"
)

// ErrCredentials means a pool's GitHub App Secret is missing or unusable.
var ErrCredentials = errors.New("GitHub App credentials")

// ErrInsecureURL means a pool's apiURL is http:// and the pool does not allow it: the App's
// tokens would travel in clear text, so nothing is sent there.
var ErrInsecureURL = errors.New("GitHub API URL is http:// and allowInsecureHTTP is not set")

// IsPlainHTTP reports whether a GitHub API URL is http://.
func IsPlainHTTP(apiURL string) bool {
	return len(apiURL) >= 7 && strings.EqualFold(apiURL[:7], "http://")
}

// PoolClients builds GitHub App clients from RunnerPools' credentials Secrets and reuses a client
// (with its cached installation token) while the Secret and API settings are unchanged, so a
// rotated Secret takes effect on the next call.
type PoolClients struct {
	Reader client.Reader
	// Transport is the base round tripper, e.g. for a GitHub Enterprise CA; nil uses the default.
	Transport http.RoundTripper

	mu      sync.Mutex
	clients map[string]*Client
}

// For returns the client and the effective scope (repository wins) of pool.
func (p *PoolClients) For(ctx context.Context, pool *fleetv1.RunnerPool) (*Client, platform.Scope, error) {
	spec := pool.Spec.GitHub
	scope := platform.Scope{Organization: spec.Organization, Repository: spec.Repository}.Effective()
	if IsPlainHTTP(spec.APIURL) && !spec.AllowInsecureHTTP {
		// The API server refuses such a pool; this covers pools stored before that rule.
		return nil, scope, fmt.Errorf("%w: %s", ErrInsecureURL, spec.APIURL)
	}
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: pool.Namespace, Name: spec.CredentialsRef.Name}
	if err := p.Reader.Get(ctx, key, secret); err != nil {
		if err := tenancy.Check(err, pool.Namespace); errors.Is(err, tenancy.ErrNamespaceNotEnabled) {
			return nil, scope, err
		}
		if apierrors.IsNotFound(err) {
			return nil, scope, fmt.Errorf("%w: Secret %s not found", ErrCredentials, key)
		}
		return nil, scope, err
	}
	timeout := ""
	if spec.HTTPTimeout != nil {
		timeout = spec.HTTPTimeout.Duration.String()
	}
	cacheKey := strings.Join([]string{string(secret.UID), secret.ResourceVersion, spec.APIURL, timeout}, "|")
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[cacheKey]; ok {
		return c, scope, nil
	}
	cfg := Config{BaseURL: spec.APIURL, PrivateKeyPEM: secret.Data[KeyPrivateKey], Transport: p.Transport}
	if spec.HTTPTimeout != nil {
		cfg.HTTPTimeout = spec.HTTPTimeout.Duration
	}
	var err error
	if cfg.AppID, err = strconv.ParseInt(strings.TrimSpace(string(secret.Data[KeyAppID])), 10, 64); err != nil {
		return nil, scope, fmt.Errorf("%w: Secret %s: %s is not a number", ErrCredentials, key, KeyAppID)
	}
	if v := strings.TrimSpace(string(secret.Data[KeyInstallationID])); v != "" {
		if cfg.InstallationID, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, scope, fmt.Errorf("%w: Secret %s: %s is not a number", ErrCredentials, key, KeyInstallationID)
		}
	}
	c, err := NewClient(cfg)
	if err != nil {
		return nil, scope, fmt.Errorf("%w: Secret %s: %v", ErrCredentials, key, err)
	}
	if p.clients == nil || len(p.clients) > 256 {
		p.clients = map[string]*Client{} // superseded Secret versions would pile up otherwise
	}
	p.clients[cacheKey] = c
	return c, scope, nil
}

// Platform is For behind the platform-neutral interface controllers use.
func (p *PoolClients) Platform(ctx context.Context, pool *fleetv1.RunnerPool) (platform.Platform, platform.Scope, error) {
	c, scope, err := p.For(ctx, pool)
	if err != nil {
		return nil, scope, err
	}
	return c, scope, nil
}

// Installation returns the proven GitHub App installation of pool's credentials (see
// Client.Installation), for routing webhooks and claiming jobs.
func (p *PoolClients) Installation(ctx context.Context, pool *fleetv1.RunnerPool) (int64, error) {
	c, scope, err := p.For(ctx, pool)
	if err != nil {
		return 0, err
	}
	return c.Installation(ctx, scope)
}
