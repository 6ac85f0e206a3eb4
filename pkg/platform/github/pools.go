package github

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

	mu      sync.Mutex
	clients map[string]*Client
}

// For returns the client and the effective scope (repository wins) of pool.
func (p *PoolClients) For(ctx context.Context, pool *fleetv1.RunnerPool) (*Client, platform.Scope, error) {
	spec := pool.Spec.Platform.GitHub
	if spec == nil {
		return nil, platform.Scope{}, fmt.Errorf("%w: pool %s/%s is not a GitHub pool", platform.ErrUnsupported, pool.Namespace, pool.Name)
	}
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
	caPEM, caVersion, err := platform.ReadCABundle(ctx, p.Reader, pool.Namespace, spec.CABundleRef)
	if err != nil {
		return nil, scope, err
	}
	cacheKey := platform.ClientKey(string(secret.UID), secret.ResourceVersion, spec.APIURL, timeout, caVersion)
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[cacheKey]; ok {
		return c, scope, nil
	}
	cfg := Config{BaseURL: spec.APIURL, PrivateKeyPEM: secret.Data[KeyPrivateKey], Transport: p.Transport, HTTPTimeout: p.HTTPTimeout}
	if caPEM != nil {
		if cfg.Transport, err = platform.TransportWithCA(p.Transport, caPEM); err != nil {
			return nil, scope, fmt.Errorf("%w: %v", platform.ErrCABundle, err)
		}
	}
	if spec.HTTPTimeout != nil {
		cfg.HTTPTimeout = spec.HTTPTimeout.Duration
	}
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
