package hyperv

import (
	"context"
	"testing"
	"time"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

const (
	testCluster      = "fleet/hv-a"
	testInstallation = "0123456789abcdef"
	otherInstall     = "fedcba9876543210"
	templateName     = hvsim.HyperVTemplate
	templateDisk     = hvsim.HyperVTemplateDisk
	runnerSwitch     = hvsim.HyperVSwitch
)

// testEnv is a set of simulated hosts, each behind its own WS-Man endpoint on loopback, and a
// provider reaching them with HyperFleet's WinRM client.
type testEnv struct {
	hv    *hvsim.HyperV
	sim   *hvsim.HyperVHosts
	p     *Provider
	hosts []string
}

// newEnv starts hosts hv1 and hv2, each with the runner template disk and the runners switch.
func newEnv(t testing.TB, cfg hvsim.HyperVConfig, mutate ...func(*Config)) *testEnv {
	t.Helper()
	env := &testEnv{hosts: []string{"hv1", "hv2"}}
	sim, err := hvsim.StartHyperV(cfg, hvsim.Options{}, env.hosts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	env.sim, env.hv = sim, sim.HyperV
	env.p = env.provider(t, testInstallation, testCluster, mutate...)
	return env
}

// provider builds another provider (another installation or cluster) on the same hosts.
func (e *testEnv) provider(t testing.TB, installation, cluster string, mutate ...func(*Config)) *Provider {
	t.Helper()
	cfg := Config{Username: hvsim.HyperVTestUser, Password: hvsim.HyperVTestPassword, Auth: "ntlm", CABundle: e.sim.CAPEM,
		Cluster: cluster, InstallationID: installation, Timeout: 10 * time.Second}
	for _, h := range e.hosts {
		endpoint := "https://" + h + ".test:5986/wsman"
		if srv := e.sim.Servers[h]; srv != nil {
			endpoint = srv.URL()
		}
		cfg.Hosts = append(cfg.Hosts, Host{Name: h, Endpoint: endpoint})
	}
	for _, m := range mutate {
		m(&cfg)
	}
	p, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("new provider: %v", err)
	}
	return p
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ownerFixture() hypervisor.Ownership {
	return hypervisor.Ownership{Cluster: testCluster, ClaimNamespace: "team-a", ClaimName: "runner-1", ClaimID: "claim-1"}
}
