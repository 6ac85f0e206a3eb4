package service

import (
	"context"
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
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/github"
)

// Keys of a RunnerPool's GitHub App credentials Secret.
const (
	KeyAppID          = "app-id"
	KeyPrivateKey     = "private-key"
	KeyInstallationID = "installation-id"
)

// Runners is where one pool registers its runners.
type Runners struct {
	Kind     platform.Kind
	Registry platform.RunnerRegistry
	Scope    platform.Scope
}

// PlatformFactory returns the runner registry of a RunnerPool.
type PlatformFactory interface {
	For(ctx context.Context, pool *fleetv1.RunnerPool) (Runners, error)
}

// GitHubPlatforms builds GitHub App clients from pools' credentials Secrets, reusing a client (and
// its cached installation token) while the Secret and the API URL are unchanged.
type GitHubPlatforms struct {
	Client client.Client
	// Transport is the base round tripper, e.g. for a GHES CA; http.DefaultTransport when nil.
	Transport http.RoundTripper

	mu      sync.Mutex
	clients map[string]*github.Client
}

// For returns the GitHub registry and scope of pool.
func (g *GitHubPlatforms) For(ctx context.Context, pool *fleetv1.RunnerPool) (Runners, error) {
	spec := pool.Spec.GitHub
	scope := platform.Scope{Organization: spec.Organization, Repository: spec.Repository}.Effective()
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: pool.Namespace, Name: spec.CredentialsRef.Name}
	if err := g.Client.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return Runners{}, refusal(http.StatusServiceUnavailable, fmt.Errorf("GitHub credentials Secret %s not found", key))
		}
		return Runners{}, err
	}
	cacheKey := strings.Join([]string{string(secret.UID), secret.ResourceVersion, spec.APIURL, timeoutOf(pool)}, "|")
	g.mu.Lock()
	defer g.mu.Unlock()
	if c, ok := g.clients[cacheKey]; ok {
		return Runners{Kind: platform.KindGitHub, Registry: c, Scope: scope}, nil
	}
	cfg := github.Config{BaseURL: spec.APIURL, PrivateKeyPEM: secret.Data[KeyPrivateKey], Transport: g.Transport}
	if spec.HTTPTimeout != nil {
		cfg.HTTPTimeout = spec.HTTPTimeout.Duration
	}
	var err error
	if cfg.AppID, err = strconv.ParseInt(strings.TrimSpace(string(secret.Data[KeyAppID])), 10, 64); err != nil {
		return Runners{}, refusal(http.StatusServiceUnavailable, fmt.Errorf("secret %s: %s is not a number", key, KeyAppID))
	}
	if v := strings.TrimSpace(string(secret.Data[KeyInstallationID])); v != "" {
		if cfg.InstallationID, err = strconv.ParseInt(v, 10, 64); err != nil {
			return Runners{}, refusal(http.StatusServiceUnavailable, fmt.Errorf("secret %s: %s is not a number", key, KeyInstallationID))
		}
	}
	c, err := github.NewClient(cfg)
	if err != nil {
		return Runners{}, refusal(http.StatusServiceUnavailable, fmt.Errorf("secret %s: %w", key, err))
	}
	if g.clients == nil || len(g.clients) > 256 {
		g.clients = map[string]*github.Client{} // old Secret versions pile up otherwise
	}
	g.clients[cacheKey] = c
	return Runners{Kind: platform.KindGitHub, Registry: c, Scope: scope}, nil
}

func timeoutOf(pool *fleetv1.RunnerPool) string {
	if pool.Spec.GitHub.HTTPTimeout == nil {
		return ""
	}
	return pool.Spec.GitHub.HTTPTimeout.Duration.String()
}
