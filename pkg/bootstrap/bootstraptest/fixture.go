package bootstraptest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	_ "github.com/hyperfleet-io/hyperfleet/pkg/platform/all" // registers every CI platform
	pinstrumented "github.com/hyperfleet-io/hyperfleet/pkg/platform/instrumented"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// ClusterName is the Cluster every fixture Machine belongs to.
const ClusterName = "runners"

// Fleet is one namespace with a RunnerPool registering runners in Repo on a fake GitHub.
type Fleet struct {
	Client    client.Client
	Namespace string
	Pool      *fleetv1.RunnerPool
	Repo      string
	Labels    []string
}

// NewFleet creates a namespace, a Cluster, the App credentials Secret and a RunnerPool.
// Platforms is the CI platform Source a bootstrap service is assembled with, as in
// cmd/bootstrap-service: GitHub App clients from pools' credentials Secrets read through c,
// instrumented once.
func Platforms(c client.Reader) platform.Source {
	src, err := platform.NewSource(platform.Inputs{Reader: c})
	if err != nil {
		panic(err)
	}
	return pinstrumented.Source(src)
}

func NewFleet(t testing.TB, c client.Client, gh *fakegithub.Server) *Fleet {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bootstrap-"}}
	must(t, c.Create(ctx, ns))
	f := &Fleet{Client: c, Namespace: ns.Name, Repo: "acme/" + ns.Name, Labels: []string{"linux", "hyperfleet"}}
	gh.AddRepository(f.Repo)
	must(t, c.Create(ctx, NewCluster(f.Namespace)))
	must(t, c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "github-app", Namespace: f.Namespace},
		Data: map[string][]byte{
			"app-id":      []byte(strconv.FormatInt(gh.AppID(), 10)),
			"private-key": gh.AppKeyPEM(),
		},
	}))
	spec := fleetv1.GitHubSpec{
		Repository: f.Repo, Labels: f.Labels, CredentialsRef: fleetv1.LocalObjectReference{Name: "github-app"},
		APIURL: gh.URL() + "/", HTTPTimeout: &metav1.Duration{Duration: 10 * time.Second},
	}
	// The pool trusts the fake as it would a GitHub Enterprise Server behind a private CA.
	if len(gh.CACertPEM()) == 0 {
		t.Fatal("bootstraptest: start the fake GitHub with Options.TLS")
	}
	must(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "github-ca", Namespace: f.Namespace},
		Data: map[string][]byte{"ca.crt": gh.CACertPEM()}}))
	spec.CABundleRef = &fleetv1.SecretKeyReference{Name: "github-ca"}
	f.Pool = builder.NewRunnerPool("pool", f.Namespace).WithCluster(ClusterName).WithGitHub(spec).Build()
	must(t, c.Create(ctx, f.Pool))
	return f
}

// NewCluster is a minimal runner Cluster on a HypervisorCluster.
func NewCluster(namespace string) *clusterv1.Cluster {
	return &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: ClusterName, Namespace: namespace},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{
			APIGroup: infrav1.GroupVersion.Group, Kind: "HypervisorCluster", Name: "pve"}},
	}
}

// Machine is one runner's objects.
type Machine struct {
	Machine *clusterv1.Machine
	Config  *bootstrapv1.BootstrapConfig
	Claim   *infrav1.MachineClaim
	ID      spiffeid.ID
	// Token is the join token, as the data Secret would carry it.
	Token string
}

// Provisioner mints credentials, e.g. a builtin.Provisioner.
type Provisioner interface {
	Provision(ctx context.Context, td spiffeid.TrustDomain, m identity.Machine, ttl time.Duration) (identity.Credential, error)
}

// NewMachine creates a Machine of the pool with its MachineClaim and BootstrapConfig, and records a
// join token valid for ttl on the config, as the BootstrapConfig controller does.
func (f *Fleet) NewMachine(t testing.TB, name string, p Provisioner, td spiffeid.TrustDomain, ttl time.Duration) *Machine {
	t.Helper()
	ctx := context.Background()
	m := &Machine{}
	m.Claim = builder.NewMachineClaim(name, f.Namespace).Build()
	must(t, f.Client.Create(ctx, m.Claim))
	m.Machine = &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.Namespace, Labels: map[string]string{
			clusterv1.ClusterNameLabel: ClusterName, fleetv1.RunnerPoolNameLabel: f.Pool.Name}},
		Spec: clusterv1.MachineSpec{
			ClusterName: ClusterName,
			Bootstrap: clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: bootstrapv1.GroupVersion.Group, Kind: "BootstrapConfig", Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{
				APIGroup: infrav1.GroupVersion.Group, Kind: "MachineClaim", Name: name},
		},
	}
	must(t, f.Client.Create(ctx, m.Machine))
	m.Config = builder.NewBootstrapConfig(name, f.Namespace).Build()
	m.Config.OwnerReferences = []metav1.OwnerReference{MachineOwnerRef(m.Machine)}
	m.Config.Labels = map[string]string{clusterv1.ClusterNameLabel: ClusterName}
	must(t, f.Client.Create(ctx, m.Config))
	cred, err := p.Provision(ctx, td, identity.Machine{Namespace: f.Namespace, Name: name, BootstrapConfig: name}, ttl)
	must(t, err)
	m.ID, m.Token = cred.ID, cred.JoinToken
	m.Config.Status.SPIFFEID = cred.ID.String()
	m.Config.Status.TokenExpirationTime = ptr.To(metav1.NewTime(cred.ExpiresAt))
	if cred.TokenHash != "" { // the builtin service redeems it; SPIRE keeps its tokens itself
		m.Config.Status.JoinToken = &bootstrapv1.JoinTokenStatus{SHA256: cred.TokenHash}
	}
	must(t, f.Client.Status().Update(ctx, m.Config))
	return m
}

// MachineOwnerRef is the controller reference Cluster API puts on a Machine's bootstrap config.
func MachineOwnerRef(m *clusterv1.Machine) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: m.Name,
		UID: m.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// Get re-reads obj.
func Get[T client.Object](t testing.TB, c client.Client, obj T) T {
	t.Helper()
	must(t, c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	return obj
}

// ShortName makes a DNS-safe object name from a test name.
func ShortName(t testing.TB) string {
	n := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(n) > 40 {
		n = n[len(n)-40:]
	}
	return strings.Trim(n, "-")
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
