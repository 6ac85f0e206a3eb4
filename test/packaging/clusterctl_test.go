package packaging

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// clusterctlEnv isolates clusterctl from the user's configuration and the network.
func clusterctlEnv(t *testing.T) []string {
	t.Helper()
	home := t.TempDir()
	return []string{"CLUSTERCTL_DISABLE_VERSIONCHECK=true", "HOME=" + home, "XDG_CONFIG_HOME=" + home}
}

// localRepository lays the release assets out as a clusterctl local provider repository,
// <dir>/<provider-label>/<version>/<files>, and returns a clusterctl configuration file naming it.
func localRepository(t *testing.T) string {
	t.Helper()
	release := releaseDir(t)
	dir := t.TempDir()
	layout := map[string][]string{
		"infrastructure-hyperfleet": {"infrastructure-components.yaml", "metadata.yaml", "cluster-template.yaml",
			"cluster-template-org.yaml", "cluster-template-tpm.yaml", "cluster-template-spire.yaml", "cluster-template-vsphere.yaml"},
		"bootstrap-hyperfleet": {"bootstrap-components.yaml", "metadata.yaml"},
	}
	for provider, files := range layout {
		version := filepath.Join(dir, provider, "v0.1.0")
		if err := os.MkdirAll(version, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if err := os.WriteFile(filepath.Join(version, f), mustRead(t, filepath.Join(release, f)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	config := filepath.Join(dir, "clusterctl.yaml")
	content := fmt.Sprintf(`providers:
- name: hyperfleet
  type: InfrastructureProvider
  url: file://%[1]s/infrastructure-hyperfleet/v0.1.0/infrastructure-components.yaml
- name: hyperfleet
  type: BootstrapProvider
  url: file://%[1]s/bootstrap-hyperfleet/v0.1.0/bootstrap-components.yaml
`, dir)
	if err := os.WriteFile(config, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return config
}

func TestClusterctlDescribeProviders(t *testing.T) {
	config := localRepository(t)
	for _, tc := range []struct{ flag, typ, image string }{
		{"--infrastructure", "InfrastructureProvider", "ghcr.io/hyperfleet-io/hyperfleet:v0.1.0"},
		{"--bootstrap", "BootstrapProvider", "ghcr.io/hyperfleet-io/hyperfleet-bootstrap-service:v0.1.0"},
	} {
		t.Run(tc.typ, func(t *testing.T) {
			g := NewWithT(t)
			out := string(run(t, nil, clusterctlEnv(t), env.Tools.Clusterctl(),
				"generate", "provider", tc.flag, "hyperfleet", "--describe", "--config", config))
			g.Expect(out).To(MatchRegexp(`Name:\s+hyperfleet`))
			g.Expect(out).To(MatchRegexp(`Type:\s+` + tc.typ))
			g.Expect(out).To(MatchRegexp(`Version:\s+v0.1.0`))
			g.Expect(out).To(MatchRegexp(`TargetNamespace:\s+hyperfleet-system`))
			g.Expect(out).To(ContainSubstring(tc.image))
			if tc.typ == "InfrastructureProvider" {
				g.Expect(out).To(ContainSubstring("HYPERFLEET_LOG_LEVEL"))
				g.Expect(out).To(ContainSubstring("HYPERFLEET_SWEEP_INTERVAL"))
			}
		})
	}
}

// TestClusterctlGenerateProvider renders the components as `clusterctl init` would install them
// (namespace fixed, clusterctl labels added, variables defaulted) and applies them as a dry run.
func TestClusterctlGenerateProvider(t *testing.T) {
	config := localRepository(t)
	for _, flag := range []string{"--infrastructure", "--bootstrap"} {
		t.Run(strings.TrimPrefix(flag, "--"), func(t *testing.T) {
			g := NewWithT(t)
			out := run(t, nil, clusterctlEnv(t), env.Tools.Clusterctl(),
				"generate", "provider", flag, "hyperfleet:v0.1.0", "--config", config)
			objs := decode(t, out)
			for _, o := range objs {
				g.Expect(o.GetLabels()).To(HaveKey("clusterctl.cluster.x-k8s.io"), "%s %s", o.GetKind(), o.GetName())
			}
			applyNamespaces(t, objs)
			noPodSecurityWarnings(t, dryRunApply(t, out))
		})
	}
}

// fleetVariables are the required variables of every flavor, with values a user might pass.
var fleetVariables = []string{
	"PROXMOX_URL=https://pve.example.com:8006",
	"PROXMOX_TOKEN_ID=hyperfleet@pve!fleet",
	"PROXMOX_TOKEN_SECRET=00000000-0000-0000-0000-000000000000",
	"GITHUB_APP_ID=123456",
	"GITHUB_APP_PRIVATE_KEY_B64=LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQo=",
	"GITHUB_REPOSITORY=example-org/app",
	"GITHUB_ORG=example-org",
	"SPIRE_SERVER_ADDRESS=spire-server.spire.svc:8081",
	"SPIRE_TRUST_DOMAIN=example.org",
	"VSPHERE_SERVER=https://vcenter.example.com",
	"VSPHERE_USERNAME=hyperfleet@vsphere.local",
	"VSPHERE_PASSWORD=S3cret!",
	"VSPHERE_CA_B64=LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",
	"VSPHERE_DATACENTER=DC0",
	"VSPHERE_COMPUTE_CLUSTER=C0",
}

func TestClusterctlGenerateCluster(t *testing.T) {
	config := localRepository(t)
	for _, tc := range []struct {
		flavor, file string
		want         []string
		// needs is a variable the flavor requires.
		needs string
	}{
		{"", "cluster-template.yaml", []string{"repository: example-org/app", "method: JoinToken"}, "PROXMOX_URL"},
		{"org", "cluster-template-org.yaml", []string{"organization: example-org", "runnerGroupID: 1"}, "PROXMOX_URL"},
		{"tpm", "cluster-template-tpm.yaml", []string{"method: TPM", "name: ubuntu-2404-runner-tpm"}, "PROXMOX_URL"},
		{"spire", "cluster-template-spire.yaml", []string{"provider: SPIRE", "spireServerAddress: spire-server.spire.svc:8081"}, "PROXMOX_URL"},
		{"vsphere", "cluster-template-vsphere.yaml", []string{"provider: vsphere", "computeCluster: C0", "name: VM Network"}, "VSPHERE_SERVER"},
	} {
		name := tc.flavor
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			ns := "fleet-" + name
			ensureNamespace(t, ns)
			vars := append(clusterctlEnv(t), fleetVariables...)
			vars = append(vars, "RUNNER_MAX=25")

			// Through the provider repository, as users run it.
			args := []string{"generate", "cluster", "demo", "--infrastructure", "hyperfleet:v0.1.0",
				"--target-namespace", ns, "--config", config}
			if tc.flavor != "" {
				args = append(args, "--flavor", tc.flavor)
			}
			required := string(run(t, nil, clusterctlEnv(t), env.Tools.Clusterctl(), append(args, "--list-variables")...))
			g := NewWithT(t)
			g.Expect(required).To(ContainSubstring(tc.needs))
			g.Expect(required).To(MatchRegexp(`RUNNER_MAX\s+\(defaults to "10"\)`))

			out := run(t, nil, vars, env.Tools.Clusterctl(), args...)
			checkFleet(t, out, ns, tc.want)

			// Straight from the repository's templates/ folder.
			fromFile := run(t, nil, vars, env.Tools.Clusterctl(), "generate", "cluster", "demo",
				"--from", filepath.Join(env.RepoRoot, "templates", tc.file), "--target-namespace", ns)
			g.Expect(string(fromFile)).To(Equal(string(out)))
		})
	}
}

// checkFleet asserts the generated runner fleet is complete and the API server accepts it.
func checkFleet(t *testing.T, out []byte, ns string, want []string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(variableRef.Find(out)).To(BeNil(), "unsubstituted variable")
	for _, w := range want {
		g.Expect(string(out)).To(ContainSubstring(w))
	}
	g.Expect(string(out)).To(ContainSubstring("maxReplicas: 25"))
	objs := decode(t, out)
	g.Expect(kinds(objs)).To(Equal(map[string]int{
		"Cluster": 1, "FleetControlPlane": 1, "HypervisorCluster": 1, "Secret": 2, "MachineClaimTemplate": 1,
		"BootstrapConfigTemplate": 1, "RunnerPool": 1, "MachineHealthCheck": 1,
	}))
	for _, o := range objs {
		g.Expect(o.GetNamespace()).To(Equal(ns))
		if o.GetKind() != "Cluster" {
			g.Expect(o.GetLabels()).To(HaveKeyWithValue("cluster.x-k8s.io/cluster-name", "demo"), "%s %s", o.GetKind(), o.GetName())
		}
	}
	dryRunApply(t, out)
}
