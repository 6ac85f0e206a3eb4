package testenv

import (
	"context"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// ConsoleServiceAccount is the console's ServiceAccount as config/console/rbac installs it.
var ConsoleServiceAccount = types.NamespacedName{Namespace: InstallNamespace, Name: "hyperfleet-console"}

// InstallConsole applies the console's shipped RBAC (config/console/rbac) and returns a client
// configuration with a token of its ServiceAccount valid for ttl: the console then has exactly the
// permissions an installation gives it.
func (e *Env) InstallConsole(ctx context.Context, ttl time.Duration) (*rest.Config, error) {
	if _, err := e.kubectl(nil, "--kubeconfig", e.KubeconfigPath, "apply", "--server-side", "--force-conflicts",
		"--field-manager=hyperfleet-install", "-k", filepath.Join(e.RepoRoot, "config", "console", "rbac")); err != nil {
		return nil, err
	}
	cfg, _, err := e.ServiceAccountConfig(ctx, ConsoleServiceAccount, ttl)
	return cfg, err
}

// EnableConsoleNamespace lets the console read the hypervisor inventory of namespace's
// HypervisorClusters, as docs/console.md tells an admin to (config/console/tenant).
func (e *Env) EnableConsoleNamespace(ctx context.Context, namespace string) error {
	_, err := e.kubectl(nil, "--kubeconfig", e.KubeconfigPath, "apply", "--server-side",
		"--field-manager=hyperfleet-install", "-n", namespace, "-k", filepath.Join(e.RepoRoot, "config", "console", "tenant"))
	return err
}
