package github

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Keys of a RunnerPool's GitHub App credentials Secret.
const (
	KeyAppID          = "app-id"
	KeyPrivateKey     = "private-key"
	KeyInstallationID = "installation-id"
)

// ErrCredentials means a pool's GitHub App Secret is missing or unusable; it matches
// platform.ErrCredentials.
var ErrCredentials error = &classedError{msg: "GitHub App credentials", class: platform.ErrCredentials}

// ErrInsecureURL means a pool's apiURL is http:// and the pool does not allow it: the App's
// tokens would travel in clear text, so nothing is sent there. It matches platform.ErrInsecureURL.
var ErrInsecureURL error = &classedError{msg: "GitHub API URL is http:// and allowInsecureHTTP is not set", class: platform.ErrInsecureURL}

// DefaultCAKey is the CA bundle key when caBundleRef.key is empty.
const DefaultCAKey = platform.DefaultCAKey

// IsPlainHTTP reports whether a GitHub API URL is http://.
func IsPlainHTTP(apiURL string) bool { return platform.IsPlainHTTP(apiURL) }

// PoolClients is the GitHub platform.Source: it builds GitHub App clients from RunnerPools' credentials Secrets and reuses a client
// (with its cached installation token) while the Secret and API settings are unchanged, so a
// rotated Secret takes effect on the next call.
type PoolClients struct {
	Reader client.Reader
	// Transport is the base round tripper, e.g. for a GitHub Enterprise CA; nil uses the default.
	Transport http.RoundTripper
	// HTTPTimeout bounds each API call of pools without spec.platform.github.httpTimeout; 0 is
	// the client's default.
	HTTPTimeout time.Duration

	clients platform.ClientCache[*Client]
}

// For returns the client and the effective scope (repository wins) of pool.
func (p *PoolClients) For(ctx context.Context, pool *fleetv1.RunnerPool) (*Client, platform.Scope, error) {
	spec := pool.Spec.Platform.GitHub
	if spec == nil {
		return nil, platform.Scope{}, fmt.Errorf("%w: pool %s/%s is not a GitHub pool", platform.ErrUnsupported, pool.Namespace, pool.Name)
	}
	scope := platform.Scope{Organization: spec.Organization, Repository: spec.Repository}.Effective()
	secrets, err := platform.PoolConnection{Namespace: pool.Namespace, URLs: []string{spec.APIURL},
		AllowInsecureHTTP: spec.AllowInsecureHTTP, InsecureURL: ErrInsecureURL,
		Credentials: spec.CredentialsRef.Name, CredentialsClass: ErrCredentials, CABundleRef: spec.CABundleRef}.Read(ctx, p.Reader)
	if err != nil {
		return nil, scope, err
	}
	secret := secrets.Credentials
	key := client.ObjectKey{Namespace: pool.Namespace, Name: spec.CredentialsRef.Name}
	timeout := ""
	if spec.HTTPTimeout != nil {
		timeout = spec.HTTPTimeout.Duration.String()
	}
	cacheKey := platform.ClientKey(string(secret.UID), secret.ResourceVersion, spec.APIURL, timeout, secrets.CAVersion)
	c, err := p.clients.Get(cacheKey, func() (*Client, error) {
		cfg := Config{BaseURL: spec.APIURL, PrivateKeyPEM: secret.Data[KeyPrivateKey],
			HTTPTimeout: platform.HTTPTimeout(spec.HTTPTimeout, p.HTTPTimeout)}
		var err error
		if cfg.Transport, err = secrets.Transport(p.Transport); err != nil {
			return nil, fmt.Errorf("%w: %v", platform.ErrCABundle, err)
		}
		if cfg.AppID, err = strconv.ParseInt(strings.TrimSpace(string(secret.Data[KeyAppID])), 10, 64); err != nil {
			return nil, fmt.Errorf("%w: Secret %s: %s is not a number", ErrCredentials, key, KeyAppID)
		}
		if v := strings.TrimSpace(string(secret.Data[KeyInstallationID])); v != "" {
			if cfg.InstallationID, err = strconv.ParseInt(v, 10, 64); err != nil {
				return nil, fmt.Errorf("%w: Secret %s: %s is not a number", ErrCredentials, key, KeyInstallationID)
			}
		}
		c, err := NewClient(cfg)
		if err != nil {
			return nil, fmt.Errorf("%w: Secret %s: %v", ErrCredentials, key, err)
		}
		return c, nil
	})
	if err != nil {
		return nil, scope, err
	}
	return c, scope, nil
}

var _ platform.Source = (*PoolClients)(nil)

// Platform is For behind the platform-neutral interface (platform.Source). Its runners
// register in the pool's runner group (spec.platform.github.runnerGroupID).
func (p *PoolClients) Platform(ctx context.Context, pool *fleetv1.RunnerPool) (platform.Platform, platform.Scope, error) {
	c, scope, err := p.For(ctx, pool)
	if err != nil {
		return nil, scope, err
	}
	return &PoolPlatform{Client: c, RunnerGroupID: pool.Spec.Platform.GitHub.RunnerGroupID}, scope, nil
}

// PoolPlatform is a Client serving one pool: Register puts runners in the pool's runner group.
type PoolPlatform struct {
	*Client
	// RunnerGroupID is the runner group; 0 is the Default group.
	RunnerGroupID int64
}

// Register implements platform.RunnerRegistry in the pool's runner group.
func (p *PoolPlatform) Register(ctx context.Context, scope platform.Scope, spec platform.RunnerSpec) (platform.Registration, error) {
	group := p.RunnerGroupID
	if group == 0 {
		group = defaultRunnerGroupID
	}
	return p.Client.RegisterInGroup(ctx, scope, spec, group)
}

// Installation returns the proven GitHub App installation ID of pool's credentials in decimal
// (see Client.Installation), for routing webhooks and claiming jobs.
func (p *PoolClients) Installation(ctx context.Context, pool *fleetv1.RunnerPool) (string, error) {
	c, scope, err := p.For(ctx, pool)
	if err != nil {
		return "", err
	}
	id, err := c.Installation(ctx, scope)
	if err != nil {
		return "", err
	}
	return formatID(id), nil
}
