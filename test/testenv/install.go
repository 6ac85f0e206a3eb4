package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// InstallNamespace is where config/default installs HyperFleet.
const InstallNamespace = "hyperfleet-system"

// Installation is HyperFleet's shipped RBAC applied to the environment, exactly as config/default
// renders it, with tokens that authenticate as its ServiceAccounts. Processes started with Manager or
// BootstrapService have the permissions an installation gives them and no more, so a missing or an
// excess permission shows up in a test.
type Installation struct {
	Namespace string
	// Manager and BootstrapService authenticate with their ServiceAccounts' tokens.
	Manager, BootstrapService *rest.Config
	// ManagerServiceAccount, BootstrapServiceAccount and WorkloadReader are the installation's
	// ServiceAccounts.
	ManagerServiceAccount, BootstrapServiceAccount, WorkloadReader types.NamespacedName
	// CASecret is the default identity CA Secret both processes are configured with.
	CASecret types.NamespacedName
	// TokenExpiry is when the two tokens expire.
	TokenExpiry time.Time
}

// installedKinds are the objects of config/default an installation's identities consist of, and
// the empty Secret its manager keeps the provenance key in.
var installedKinds = map[string]bool{"Namespace": true, "ServiceAccount": true, "ClusterRole": true,
	"ClusterRoleBinding": true, "Role": true, "RoleBinding": true, "Secret": true}

// Install applies the ServiceAccounts, ClusterRoles, Roles and bindings of config/default (in
// hyperfleet-system, as shipped) and requests tokens valid for ttl for the manager and the bootstrap
// service. Installing twice is harmless; each call returns fresh tokens.
func (e *Env) Install(ctx context.Context, ttl time.Duration) (*Installation, error) {
	rendered, err := e.kubectl(nil, "kustomize", filepath.Join(e.RepoRoot, "config", "default"))
	if err != nil {
		return nil, err
	}
	var keep bytes.Buffer
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(rendered), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if err.Error() == "EOF" {
				break
			}
			return nil, fmt.Errorf("decoding config/default: %w", err)
		}
		if kind, _ := obj["kind"].(string); !installedKinds[kind] {
			continue
		}
		y, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		keep.WriteString("---\n")
		keep.Write(y)
	}
	if _, err := e.kubectl(keep.Bytes(), "--kubeconfig", e.KubeconfigPath, "apply", "--server-side",
		"--force-conflicts", "--field-manager=hyperfleet-install", "-f", "-"); err != nil {
		return nil, err
	}
	inst := &Installation{
		Namespace:               InstallNamespace,
		ManagerServiceAccount:   types.NamespacedName{Namespace: InstallNamespace, Name: "hyperfleet-controller-manager"},
		BootstrapServiceAccount: types.NamespacedName{Namespace: InstallNamespace, Name: "hyperfleet-bootstrap-service"},
		WorkloadReader:          types.NamespacedName{Namespace: InstallNamespace, Name: "hyperfleet-workload-reader"},
		CASecret:                types.NamespacedName{Namespace: InstallNamespace, Name: "hyperfleet-bootstrap-ca"},
	}
	if inst.Manager, inst.TokenExpiry, err = e.ServiceAccountConfig(ctx, inst.ManagerServiceAccount, ttl); err != nil {
		return nil, err
	}
	if inst.BootstrapService, _, err = e.ServiceAccountConfig(ctx, inst.BootstrapServiceAccount, ttl); err != nil {
		return nil, err
	}
	return inst, nil
}

// EnableNamespace does what docs/install.md tells an admin to do to let HyperFleet serve a
// namespace: apply config/tenant there.
func (e *Env) EnableNamespace(ctx context.Context, namespace string) error {
	if err := e.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	_, err := e.kubectl(nil, "--kubeconfig", e.KubeconfigPath, "apply", "--server-side",
		"--field-manager=hyperfleet-install", "-n", namespace, "-k", filepath.Join(e.RepoRoot, "config", "tenant"))
	return err
}

// ServiceAccountConfig returns a client configuration that authenticates with a token of sa valid
// for ttl (the API server's TokenRequest), and when the token expires.
func (e *Env) ServiceAccountConfig(ctx context.Context, sa types.NamespacedName, ttl time.Duration) (*rest.Config, time.Time, error) {
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(ttl.Seconds()))}}
	obj := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: sa.Namespace, Name: sa.Name}}
	if err := e.Client.SubResource("token").Create(ctx, obj, tr); err != nil {
		return nil, time.Time{}, fmt.Errorf("token for ServiceAccount %s: %w", sa, err)
	}
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg, tr.Status.ExpirationTimestamp.Time, nil
}

// User returns a client configuration of a new user (client certificate) in groups.
func (e *Env) User(name string, groups ...string) (*rest.Config, error) {
	if e.env == nil {
		return nil, fmt.Errorf("user %s: an environment made by Connect has no client CA of its own", name)
	}
	u, err := e.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, err
	}
	return u.Config(), nil
}

// GrantClusterRole binds the ClusterRole role to user in namespace, as `kubectl create rolebinding
// --clusterrole=role --user=user` does.
func (e *Env) GrantClusterRole(ctx context.Context, namespace, role, user string) error {
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role + "-" + user, Namespace: namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	return client.IgnoreAlreadyExists(e.Client.Create(ctx, rb))
}

func (e *Env) kubectl(stdin []byte, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Tools.Kubectl(), args...)
	cmd.Dir = e.RepoRoot
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}
