package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/hyperfleet-io/hyperfleet/api"
)

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	// Client talks to the API server directly, without a cache.
	Client client.Client
	Scheme *runtime.Scheme
	// KubeconfigPath is an admin kubeconfig for kubectl and child processes.
	KubeconfigPath string
	// RepoRoot is the repository's top directory.
	RepoRoot string
	// Tools locates the toolchain built by hack/tools.sh.
	Tools Tools

	env *envtest.Environment
	dir string
	// wrappers holds the control plane's binaries made to die with this process.
	wrappers string
}

// Tools are the toolchain paths.
type Tools struct {
	// Assets holds etcd, kube-apiserver and kubectl (KUBEBUILDER_ASSETS).
	Assets string
	// CAPIDir holds capi-manager, clusterctl and Cluster API's CRDs.
	CAPIDir string
}

// Kubectl is the path of the kubectl binary.
func (t Tools) Kubectl() string { return filepath.Join(t.Assets, "kubectl") }

// CAPIManager is the path of the Cluster API core manager binary.
func (t Tools) CAPIManager() string { return filepath.Join(t.CAPIDir, "capi-manager") }

// Clusterctl is the path of the clusterctl binary.
func (t Tools) Clusterctl() string { return filepath.Join(t.CAPIDir, "clusterctl") }

// ToolsCacheDir is where hack/tools.sh, hack/helm.sh and hack/spire.sh put what they build:
// TOOLS_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/hyperfleet/tools.
func ToolsCacheDir() (string, error) {
	if cache := os.Getenv("TOOLS_CACHE"); cache != "" {
		return cache, nil
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "hyperfleet", "tools"), nil
}

// FindTools locates the toolchain: KUBEBUILDER_ASSETS and CAPI_DIR when set, else the default cache
// of hack/tools.sh.
func FindTools() (Tools, error) {
	cache, err := ToolsCacheDir()
	if err != nil {
		return Tools{}, err
	}
	t := Tools{Assets: os.Getenv("KUBEBUILDER_ASSETS"), CAPIDir: os.Getenv("CAPI_DIR")}
	if t.Assets == "" {
		t.Assets = filepath.Join(cache, "k8s")
	}
	if t.CAPIDir == "" {
		t.CAPIDir = filepath.Join(cache, "capi")
	}
	for _, bin := range []string{filepath.Join(t.Assets, "kube-apiserver"), filepath.Join(t.Assets, "etcd"), filepath.Join(t.CAPIDir, "crds")} {
		if _, err := os.Stat(bin); err != nil {
			return t, fmt.Errorf("toolchain incomplete (%v): run `make tools` first", err)
		}
	}
	return t, nil
}

// RepoRoot finds the directory holding go.mod, walking up from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Start brings up kube-apiserver and etcd with Cluster API's and HyperFleet's CRDs installed.
func Start() (*Env, error) {
	tools, err := FindTools()
	if err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	e := &Env{Scheme: api.NewScheme(), RepoRoot: root, Tools: tools}
	assets, err := e.dyingWithUs(tools.Assets)
	if err != nil {
		return nil, err
	}
	e.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths: []string{
			filepath.Join(root, "config", "crd", "bases"),
			filepath.Join(tools.CAPIDir, "crds"),
		},
		ErrorIfCRDPathMissing:    true,
		Scheme:                   e.Scheme,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// Explicit paths: envtest would otherwise prefer KUBEBUILDER_ASSETS (which make exports) to
	// BinaryAssetsDirectory and bypass the wrappers.
	e.env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(assets, "etcd")}
	e.env.ControlPlane.GetAPIServer().Path = filepath.Join(assets, "kube-apiserver")
	e.env.ControlPlane.KubectlPath = tools.Kubectl()
	if e.Config, err = e.env.Start(); err != nil {
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: e.Scheme}); err != nil {
		_ = e.env.Stop()
		return nil, err
	}
	if e.dir, err = os.MkdirTemp("", "hyperfleet-testenv-"); err != nil {
		_ = e.env.Stop()
		return nil, err
	}
	user, err := e.env.ControlPlane.AddUser(envtest.User{Name: "hyperfleet-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		_ = e.Stop()
		return nil, err
	}
	e.KubeconfigPath = filepath.Join(e.dir, "kubeconfig")
	if err := os.WriteFile(e.KubeconfigPath, kubeconfig, 0o600); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

// Connect is an environment on a cluster that runs already (a real node, with HyperFleet installed
// there), as its administrator's kubeconfig reaches it: Stop leaves the cluster running, and User,
// which needs envtest's own CA, is not available.
func Connect(kubeconfig string) (*Env, error) {
	tools, err := FindTools()
	if err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	e := &Env{Scheme: api.NewScheme(), RepoRoot: root, Tools: tools, KubeconfigPath: kubeconfig}
	if e.Config, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
		return nil, err
	}
	if e.Client, err = client.New(e.Config, client.Options{Scheme: e.Scheme}); err != nil {
		return nil, err
	}
	if e.dir, err = os.MkdirTemp("", "hyperfleet-testenv-"); err != nil {
		return nil, err
	}
	return e, nil
}

// Stop tears the control plane down (of an environment Connect made, only its scratch directory).
func (e *Env) Stop() error {
	var err error
	if e.env != nil {
		err = e.env.Stop()
	}
	for _, dir := range []string{e.dir, e.wrappers} {
		if dir != "" {
			_ = os.RemoveAll(dir)
		}
	}
	return err
}

// dyingWithUs returns a directory of etcd and kube-apiserver that die with this process: wrappers
// that exec the real binaries under `setpriv --pdeathsig KILL`, so a test binary killed by a
// timeout or a signal leaves no control plane behind. Without setpriv (util-linux) it returns
// assets as they are.
func (e *Env) dyingWithUs(assets string) (string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil || goruntime.GOOS != "linux" {
		return assets, nil
	}
	if e.wrappers, err = os.MkdirTemp("", "hyperfleet-envtest-bin-"); err != nil {
		return "", err
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", setpriv, filepath.Join(assets, name))
		if err := os.WriteFile(filepath.Join(e.wrappers, name), []byte(script), 0o755); err != nil {
			return "", err
		}
	}
	return e.wrappers, nil
}

// TempDir is a scratch directory removed with the environment.
func (e *Env) TempDir() string { return e.dir }

// CreateAndWait creates obj and waits until reader (typically a manager's cached client) sees it, so
// a reconciler triggered right after never acts on a stale cache.
func CreateAndWait(ctx context.Context, c client.Client, reader client.Reader, obj client.Object) error {
	if err := c.Create(ctx, obj); err != nil {
		return err
	}
	return WaitFor(ctx, reader, obj)
}

// WaitFor polls reader until obj exists there.
func WaitFor(ctx context.Context, reader client.Reader, obj client.Object) error {
	key := client.ObjectKeyFromObject(obj)
	probe := obj.DeepCopyObject().(client.Object)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		if err := reader.Get(ctx, key, probe); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %T %s in cache: %w", obj, key, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
