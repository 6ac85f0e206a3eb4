package devfleet

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/pkg/console"
	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
)

// The local fleet's console: its OIDC client, roles and the person who signs in.
const (
	ConsoleClientID     = "hyperfleet-console"
	ConsoleOperatorRole = "HyperFleet.Operator"
	ConsoleViewerRole   = "HyperFleet.Viewer"
	ConsoleOperator     = "operator"
	ConsoleViewer       = "viewer"
)

// ConsoleState is the operator console and the identity provider people sign in with.
type ConsoleState struct {
	URL       string `json:"url"`
	IssuerURL string `json:"issuerURL"`
	// Username and Password sign in with the operator role (edit in the fleet's namespace);
	// ViewerPassword signs in as "viewer" with the read-only role.
	Username       string `json:"username"`
	Password       string `json:"password"`
	ViewerPassword string `json:"viewerPassword"`
	// TokenFile holds an ID token of the operator, valid a day, for API clients such as the
	// Terraform provider (token_file).
	TokenFile string `json:"tokenFile,omitempty"`
}

// startConsole runs a local OIDC issuer and the console in front of it, with the console's shipped
// RBAC and a token of its ServiceAccount. The operator gets HyperFleet's edit rights in the fleet's
// namespace (as docs/console.md tells an admin), the viewer its view rights.
func (f *Fleet) startConsole(ctx, runCtx context.Context) error {
	listen := f.opts.ConsoleListen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("console listener: %w", err)
	}
	base := "http://" + l.Addr().String()
	operatorPW, viewerPW := randomHex(6), randomHex(6)
	operator := fakeoidc.User{Username: ConsoleOperator, Password: operatorPW, Email: "operator@hyperfleet.local",
		Name: "Fleet Operator", Groups: []string{"fleet-operators"}, Roles: []string{ConsoleOperatorRole}}
	viewer := fakeoidc.User{Username: ConsoleViewer, Password: viewerPW, Email: "viewer@hyperfleet.local",
		Name: "Fleet Viewer", Roles: []string{ConsoleViewerRole}}
	clientSecret := randomHex(16)
	issuer, err := fakeoidc.Start(fakeoidc.Options{Users: []fakeoidc.User{operator, viewer},
		Clients: []fakeoidc.Client{{ID: ConsoleClientID, Secret: clientSecret, RedirectURIs: []string{base + "/oidc/callback"}}}})
	if err != nil {
		_ = l.Close()
		return err
	}
	f.stops = append(f.stops, func() { _ = issuer.Close() })

	cfg, err := f.Env.InstallConsole(ctx, TokenLifetime)
	if err != nil {
		_ = l.Close()
		return err
	}
	if err := f.Env.EnableConsoleNamespace(ctx, f.opts.Namespace); err != nil {
		_ = l.Close()
		return err
	}
	if err := f.grantConsolePeople(ctx, "oidc:"+operator.Email, "oidc:"+viewer.Email); err != nil {
		_ = l.Close()
		return err
	}
	key := make([]byte, 48)
	if _, err := rand.Read(key); err != nil {
		_ = l.Close()
		return err
	}
	settings := console.Settings{
		Listen: l.Addr().String(), PublicURL: base, IssuerURL: issuer.Issuer(), ClientID: ConsoleClientID, ClientSecret: clientSecret,
		RoleName: ConsoleOperatorRole, ReadOnlyRoleName: ConsoleViewerRole, RoleClaim: "roles", UsernameClaim: "email",
		GroupsClaim: "groups", UsernamePrefix: "oidc:", GroupsPrefix: "oidc:", SessionKey: key, InsecureCookies: true,
		InventoryRefreshInterval: 2 * time.Second, LogLevel: f.opts.LogLevel, HistoryURL: f.historyURL(),
	}
	srv, err := console.New(ctx, console.Options{Settings: settings, Config: cfg, Scheme: f.Env.Scheme, Log: f.log.WithName("console")})
	if err != nil {
		_ = l.Close()
		return err
	}
	done := make(chan struct{}, 2)
	go func() { _ = srv.Inventory().Start(runCtx); done <- struct{}{} }()
	go func() {
		if err := srv.Serve(runCtx, l); err != nil && err != http.ErrServerClosed {
			f.log.Error(err, "console stopped")
		}
		done <- struct{}{}
	}()
	f.stops = append(f.stops, func() { <-done; <-done })
	f.State.Console = &ConsoleState{URL: base, IssuerURL: issuer.Issuer(), Username: operator.Username, Password: operatorPW,
		ViewerPassword: viewerPW}
	// An operator's token for API clients (Terraform), as the identity provider's tooling would
	// write one.
	tok, err := issuer.Token(operator, ConsoleClientID, fakeoidc.TokenOptions{ExpiresIn: 24 * time.Hour})
	if err != nil {
		return err
	}
	tokenFile := filepath.Join(f.stateDir, "operator-token")
	if err := os.WriteFile(tokenFile, []byte(tok+"\n"), 0o600); err != nil {
		return err
	}
	f.State.Console.TokenFile = tokenFile
	return nil
}

// grantConsolePeople gives the operator HyperFleet's edit rights and the viewer its view rights in
// the fleet's namespace. The local control plane fills no aggregated roles, so the rights of the
// built-in edit role that creating a VM needs (its user-data Secret) and the Events the job logs
// show come from a role of their own.
func (f *Fleet) grantConsolePeople(ctx context.Context, operator, viewer string) error {
	c := f.Env.Client
	extra := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "hyperfleet-dev-console-person"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"get", "list", "watch"}},
		}}
	if err := c.Create(ctx, extra); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	ns := f.opts.Namespace
	for user, roles := range map[string][]string{
		operator: {"hyperfleet-aggregate-to-edit", extra.Name},
		viewer:   {"hyperfleet-aggregate-to-view"},
	} {
		for _, role := range roles {
			if err := f.Env.GrantClusterRole(ctx, ns, role, user); err != nil {
				return err
			}
		}
	}
	return nil
}
