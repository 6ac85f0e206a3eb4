package console

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/hyperfleet-io/hyperfleet/api"
	"github.com/hyperfleet-io/hyperfleet/controllers"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/console"
	"github.com/hyperfleet-io/hyperfleet/pkg/logging"
	"github.com/hyperfleet-io/hyperfleet/pkg/manager"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

// Roles and client of the console under test.
const (
	clientID     = "hyperfleet-console"
	clientSecret = "console-client-secret"
	operatorRole = "HyperFleet.Operator"
	viewerRole   = "HyperFleet.Viewer"
	teamA        = "console-team-a"
	teamB        = "console-team-b"
)

// People of the identity provider. alice has edit in team-a only; victor has the read-only role
// and view in team-a; carol has no console role; mallory claims Kubernetes' admin group. bob has
// edit in team-b only; vera has the console's role but only view in team-a; rita has the
// console's role and may read team-a's RunnerPools and nothing else; eve's identity provider
// has not verified the address she gave, which is bob's.
var (
	alice   = fakeoidc.User{Username: "alice", Password: "alice-pw", Email: "alice@example.com", Name: "Alice Operator", Groups: []string{"team-a"}, Roles: []string{operatorRole}}
	victor  = fakeoidc.User{Username: "victor", Password: "victor-pw", Email: "victor@example.com", Name: "Victor Viewer", Roles: []string{viewerRole}}
	carol   = fakeoidc.User{Username: "carol", Password: "carol-pw", Email: "carol@example.com", Name: "Carol", Roles: []string{"SomethingElse"}}
	mallory = fakeoidc.User{Username: "mallory", Password: "mallory-pw", Email: "mallory@example.com", Name: "Mallory", Groups: []string{"system:masters"}, Roles: []string{operatorRole}}
	bob     = fakeoidc.User{Username: "bob", Password: "bob-pw", Email: "bob@example.com", Name: "Bob Operator", Groups: []string{"team-b"}, Roles: []string{operatorRole}}
	vera    = fakeoidc.User{Username: "vera", Password: "vera-pw", Email: "vera@example.com", Name: "Vera Viewer", Roles: []string{operatorRole}}
	rita    = fakeoidc.User{Username: "rita", Password: "rita-pw", Email: "rita@example.com", Name: "Rita Runners", Roles: []string{operatorRole}}
	// eve holds the console's role and registered bob's address without proving it is hers.
	eve = fakeoidc.User{Username: "eve", Password: "eve-pw", Email: bob.Email, EmailUnverified: true, Name: "Eve", Roles: []string{operatorRole}}
	// audrey may list MachineClaims and Namespaces cluster-wide: she reads the whole audit log.
	audrey = fakeoidc.User{Username: "audrey", Password: "audrey-pw", Email: "audrey@example.com", Name: "Audrey Auditor", Groups: []string{"auditors"}, Roles: []string{operatorRole}}
)

var (
	env  *testenv.Env
	inst *testenv.Installation
	// consoleConfig authenticates as the console's ServiceAccount.
	consoleConfig *rest.Config
)

func TestMain(m *testing.M) {
	testenv.ExitIfShort("an API server and a browser")
	level := os.Getenv("LOG_LEVEL")
	if level == "" {
		level = "ERROR"
	}
	log, _ := logging.New(level, os.Stderr)
	ctrl.SetLogger(log)
	var err error
	if env, err = testenv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		ctx := context.Background()
		if inst, err = env.Install(ctx, time.Hour); err != nil {
			fmt.Fprintln(os.Stderr, "installing HyperFleet's RBAC:", err)
			return 1
		}
		if consoleConfig, err = env.InstallConsole(ctx, time.Hour); err != nil {
			fmt.Fprintln(os.Stderr, "installing the console's RBAC:", err)
			return 1
		}
		if err := installSessionRevocations(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "installing the list of signed-out sessions:", err)
			return 1
		}
		for _, ns := range []string{teamA, teamB} {
			if err := env.EnableNamespace(ctx, ns); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := env.EnableConsoleNamespace(ctx, ns); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		// People get the built-in roles HyperFleet's kinds aggregate into, as docs/console.md
		// says. envtest runs no controller that fills the aggregated built-in roles, so the
		// aggregated HyperFleet role is bound next to them, and the Secrets, Events and ConfigMaps
		// rights edit has on a real cluster come from a stand-in role.
		if err := env.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "console-test-edit-secrets"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets", "events", "configmaps"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := env.Client.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "console-test-runnerpools-only"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"hyperfleet.io"}, Resources: []string{"runnerpools"},
				Verbs: []string{"get", "list", "watch"}}}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := grantAuditor(ctx, "oidc:"+audrey.Email); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		grants := map[string]map[string][]string{
			teamA: {
				"oidc:alice@example.com":  {"edit", "hyperfleet-aggregate-to-edit", "console-test-edit-secrets"},
				"oidc:victor@example.com": {"view", "hyperfleet-aggregate-to-view"},
				"oidc:vera@example.com":   {"view", "hyperfleet-aggregate-to-view"},
				"oidc:rita@example.com":   {"console-test-runnerpools-only"},
			},
			teamB: {
				"oidc:bob@example.com": {"edit", "hyperfleet-aggregate-to-edit", "console-test-edit-secrets"},
			},
		}
		for ns, users := range grants {
			for user, roles := range users {
				for _, role := range roles {
					if err := env.GrantClusterRole(ctx, ns, role, user); err != nil {
						fmt.Fprintln(os.Stderr, err)
						return 1
					}
				}
			}
		}
		return m.Run()
	}()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping envtest:", err)
	}
	os.Exit(code)
}

// sessionRevocations is the ConfigMap config/console/sessions installs.
const sessionRevocations = "hyperfleet-system/hyperfleet-console-sessions"

// installSessionRevocations applies config/console/sessions, as docs/console.md tells an admin to.
func installSessionRevocations(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, env.Tools.Kubectl(), "--kubeconfig", env.KubeconfigPath, "apply", "--server-side",
		"--field-manager=hyperfleet-install", "-k", filepath.Join(env.RepoRoot, "config", "console", "sessions")).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// fixture is a running console with its identity provider.
type fixture struct {
	issuer *fakeoidc.Server
	server *console.Server
	// sessionKey seals its cookies.
	sessionKey []byte
	// URL is the console's base URL.
	URL string
	// stop shuts the console down gracefully and waits for it (also done when the test ends).
	stop func()
}

// startConsole runs an identity provider and a console (with its ServiceAccount's token and
// shipped RBAC) on loopback until the test ends.
func startConsole(t *testing.T) *fixture {
	t.Helper()
	return startReplica(t, nil)
}

// startReplica runs another replica of primary's console, sharing its identity provider and
// session key; without primary, a console of its own, as startConsole does.
func startReplica(t *testing.T, primary *fixture) *fixture {
	t.Helper()
	return startConsoleWithHistory(t, primary, "sqlite://"+filepath.Join(t.TempDir(), "history.db"))
}

// startConsoleWithHistory runs a console, as startReplica does, whose audit log is in historyURL.
func startConsoleWithHistory(t *testing.T, primary *fixture, historyURL string) *fixture {
	t.Helper()
	g := NewWithT(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	base := "http://" + l.Addr().String()
	var issuer *fakeoidc.Server
	key := make([]byte, 32)
	if primary != nil {
		issuer, key = primary.issuer, primary.sessionKey
	} else {
		issuer, err = fakeoidc.Start(fakeoidc.Options{
			Users:   []fakeoidc.User{alice, victor, carol, mallory, bob, vera, rita, eve, audrey},
			Clients: []fakeoidc.Client{{ID: clientID, Secret: clientSecret, RedirectURIs: []string{base + "/oidc/callback"}}},
		})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = issuer.Close() })
		_, _ = rand.Read(key)
	}
	settings := console.Settings{
		Listen: l.Addr().String(), PublicURL: base, IssuerURL: issuer.Issuer(), ClientID: clientID, ClientSecret: clientSecret,
		RoleName: operatorRole, ReadOnlyRoleName: viewerRole, RoleClaim: "roles", UsernameClaim: "email", GroupsClaim: "groups",
		UsernamePrefix: "oidc:", GroupsPrefix: "oidc:", SessionKey: key, InsecureCookies: true,
		SessionRevocations: sessionRevocations, InventoryRefreshInterval: time.Second, LogLevel: "ERROR",
		HistoryURL: historyURL,
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := console.New(ctx, console.Options{Settings: settings, Config: consoleConfig, Scheme: api.NewScheme(), Log: ctrl.Log.WithName("console")})
	g.Expect(err).NotTo(HaveOccurred())
	done := make(chan struct{}, 2)
	go func() { _ = srv.Inventory().Start(ctx); done <- struct{}{} }()
	go func() { _ = srv.Serve(ctx, l); done <- struct{}{} }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done; <-done }) }
	t.Cleanup(stop)
	g.Eventually(func() int {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}, 20*time.Second, 100*time.Millisecond).Should(Equal(http.StatusOK))
	return &fixture{issuer: issuer, server: srv, sessionKey: key, URL: base, stop: stop}
}

// grantAuditor lets user list MachineClaims and Namespaces cluster-wide, and nothing else.
func grantAuditor(ctx context.Context, user string) error {
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "console-test-auditor"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"infrastructure.cluster.x-k8s.io"}, Resources: []string{"machineclaims"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list"}}}}
	if err := env.Client.Create(ctx, role); err != nil {
		return err
	}
	return env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "console-test-auditor"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}})
}

// token mints a token of user for the console, changed by o.
func (f *fixture) token(t *testing.T, user fakeoidc.User, o fakeoidc.TokenOptions) string {
	t.Helper()
	tok, err := f.issuer.Token(user, clientID, o)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// startManager runs HyperFleet's manager with the installation's ServiceAccount token, until the
// test ends.
func startManager(t *testing.T) {
	t.Helper()
	cfg := &config.Manager{
		MetricsBindAddress: "0", HealthProbeBindAddress: "0", WebhookBindAddress: "0", Concurrency: 2,
		SyncPeriod: time.Minute, SweepInterval: time.Second, OrphanGracePeriod: time.Minute,
		ProviderTimeout: 5 * time.Second, LeaderElectionID: "hyperfleet-console-test",
		BootstrapCASecret: inst.CASecret.String(), TrustDomain: "hyperfleet.local",
		BootstrapServiceURL: "https://127.0.0.1:8443", RepairInterval: time.Hour,
		WorkloadReaderServiceAccount: inst.WorkloadReader.String(),
	}
	mgr, err := manager.New(context.Background(), inst.Manager, cfg, func(o *controllers.Options) { o.Testing.SkipNameValidation = true })
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	testenv.RunManager(t, mgr)
}

// hypervisorCluster creates a HypervisorCluster for sim in namespace, with its Secrets.
func hypervisorCluster(t *testing.T, sim *pvesim.Simulator, namespace, name string) {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-credentials", Namespace: namespace},
		StringData: map[string]string{connection.KeyTokenID: pvesim.TestTokenID, connection.KeyTokenSecret: pvesim.TestTokenSecret}})).To(Succeed())
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-ca", Namespace: namespace},
		Data: map[string][]byte{"ca.crt": sim.CACertPEM()}})).To(Succeed())
	hc := builder.NewHypervisorCluster(name, namespace).WithEndpoint(strings.TrimSuffix(sim.URL(), "/api2/json")).
		WithCredentials(name+"-credentials").WithCABundle(name+"-ca", "").
		WithHealthCheckInterval(metav1.Duration{Duration: time.Second}).Build()
	g.Expect(env.Client.Create(ctx, hc)).To(Succeed())
}
