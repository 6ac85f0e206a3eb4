package console

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/console"
	tfprovider "github.com/hyperfleet-io/hyperfleet/pkg/terraform"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

var providers = map[string]func() (tfprotov6.ProviderServer, error){
	"hyperfleet": providerserver.NewProtocol6WithError(tfprovider.New("test")()),
}

// terraformBinary points terraform-plugin-testing at the Terraform on the PATH.
func terraformBinary(t *testing.T) {
	t.Helper()
	bin, err := exec.LookPath("terraform")
	if err != nil {
		t.Skip("no terraform on the PATH: the provider's acceptance tests need a Terraform binary")
	}
	t.Setenv("TF_ACC", "1")
	t.Setenv("TF_ACC_TERRAFORM_PATH", bin)
	t.Setenv("CHECKPOINT_DISABLE", "1")
}

func vmConfig(f *fixture, token, namespace, extra string) string {
	return fmt.Sprintf(`
provider "hyperfleet" {
  endpoint            = %q
  token               = %q
  allow_insecure_http = true
}

data "hyperfleet_hosts" "all" {
  namespace = %q
}

data "hyperfleet_clusters" "all" {
  namespace = %q
}

data "hyperfleet_vms" "all" {
  namespace  = %q
  depends_on = [hyperfleet_vm.db]
}

resource "hyperfleet_vm" "db" {
  namespace = %q
  name      = "tf-vm"
  cluster   = "pve-tf"
  template  = "9000"
  memory_mib = 1024
%s
}
`, f.URL, token, namespace, namespace, namespace, namespace, extra)
}

// TestTerraformDrivesAVM runs HyperFleet's Terraform provider with a real Terraform binary against
// the console, the fake identity provider and the Proxmox simulator: a VM is created and waited
// for, a second plan is empty, run_strategy Halted powers it off in place, a CPU change replaces
// it, it imports by namespace/name, a VM deleted outside Terraform is planned again, and the
// whole is destroyed with the VM gone from the hypervisor.
func TestTerraformDrivesAVM(t *testing.T) {
	terraformBinary(t)
	g := NewWithT(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t)
	hypervisorCluster(t, sim, teamA, "pve-tf")
	f := startConsole(t)
	tok := f.token(t, alice, fakeoidc.TokenOptions{ExpiresIn: time.Hour})
	g.Eventually(func(g Gomega) {
		r := f.call(t, http.MethodGet, "/api/v1/hosts?namespace="+teamA, tok, nil)
		var hosts console.List[console.Host]
		r.decode(t, &hosts)
		g.Expect(hosts.Items).To(ContainElement(HaveField("Cluster", "pve-tf")))
	}, 30*time.Second, 250*time.Millisecond).Should(Succeed(), "the inventory reads the simulator's hosts")
	vmOnSim := func(want string) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			id := s.RootModule().Resources["hyperfleet_vm.db"].Primary.Attributes["vm_id"]
			vm, ok := sim.VM(vmidOf(id))
			if !ok {
				return fmt.Errorf("VM %s is not on the simulator", id)
			}
			if vm.Status != want {
				return fmt.Errorf("VM %s is %s, want %s", id, vm.Status, want)
			}
			return nil
		}
	}
	var firstID string
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				Config: vmConfig(f, tok, teamA, "  cpus = 2"),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("hyperfleet_vm.db", "id", teamA+"/tf-vm"),
					resource.TestCheckResourceAttr("hyperfleet_vm.db", "phase", "Running"),
					resource.TestCheckResourceAttr("hyperfleet_vm.db", "power_state", "Running"),
					resource.TestCheckResourceAttr("hyperfleet_vm.db", "run_strategy", "Always"),
					resource.TestCheckResourceAttrSet("hyperfleet_vm.db", "node"),
					resource.TestCheckResourceAttrWith("hyperfleet_vm.db", "vm_id", func(v string) error { firstID = v; return nil }),
					resource.TestCheckResourceAttrSet("data.hyperfleet_hosts.all", "hosts.0.name"),
					resource.TestCheckTypeSetElemNestedAttrs("data.hyperfleet_clusters.all", "clusters.*", map[string]string{"name": "pve-tf", "provider": "Proxmox"}),
					resource.TestCheckTypeSetElemNestedAttrs("data.hyperfleet_vms.all", "vms.*", map[string]string{"name": "tf-vm", "persistent": "true"}),
					vmOnSim("running"),
				),
			},
			{Config: vmConfig(f, tok, teamA, "  cpus = 2"), PlanOnly: true},
			{
				Config: vmConfig(f, tok, teamA, "  cpus = 2\n  run_strategy = \"Halted\""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("hyperfleet_vm.db", plancheck.ResourceActionUpdate)}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("hyperfleet_vm.db", "power_state", "Stopped"),
					vmOnSim("stopped"),
				),
			},
			{
				Config: vmConfig(f, tok, teamA, "  cpus = 4"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("hyperfleet_vm.db", plancheck.ResourceActionDestroyBeforeCreate)}},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("hyperfleet_vm.db", "cpus", "4"),
					resource.TestCheckResourceAttrWith("hyperfleet_vm.db", "vm_id", func(v string) error {
						if v == firstID {
							return fmt.Errorf("the VM was not replaced: still %s", v)
						}
						return nil
					}),
					vmOnSim("running"),
				),
			},
			{ResourceName: "hyperfleet_vm.db", ImportState: true, ImportStateId: teamA + "/tf-vm", ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"user_data", "host"}},
			{
				PreConfig: func() {
					r := f.call(t, http.MethodDelete, "/api/v1/vms/"+teamA+"/tf-vm", tok, nil)
					g.Expect(r.Status).To(Equal(http.StatusAccepted), string(r.Body))
					g.Eventually(func() int { return f.call(t, http.MethodGet, "/api/v1/vms/"+teamA+"/tf-vm", tok, nil).Status },
						2*time.Minute, 250*time.Millisecond).Should(Equal(http.StatusNotFound))
				},
				Config: vmConfig(f, tok, teamA, "  cpus = 4"), PlanOnly: true, ExpectNonEmptyPlan: true,
			},
			{Config: vmConfig(f, tok, teamA, "  cpus = 4"), Check: vmOnSim("running")},
		},
		CheckDestroy: func(*terraform.State) error {
			claims := &infrav1.MachineClaimList{}
			if err := env.Client.List(context.Background(), claims, client.InNamespace(teamA)); err != nil {
				return err
			}
			for _, c := range claims.Items {
				if c.Name == "tf-vm" {
					return fmt.Errorf("MachineClaim %s/tf-vm is still there", teamA)
				}
			}
			return nil
		},
	})
}

// TestTerraformRefusals: a wait_timeout that is no duration is refused at plan time, a field the
// console refuses is reported on its attribute, and a change namespace RBAC forbids is a clear
// error, not a crash.
func TestTerraformRefusals(t *testing.T) {
	terraformBinary(t)
	f := startConsole(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{Config: vmConfig(f, f.token(t, alice, fakeoidc.TokenOptions{ExpiresIn: time.Hour}), teamA, "  wait_timeout = \"soon\""),
				ExpectError: regexp.MustCompile(`wait_timeout "soon" is not a positive duration`)},
			{Config: vmConfig(f, f.token(t, alice, fakeoidc.TokenOptions{ExpiresIn: time.Hour}), teamA, "  cpus = 9999"),
				ExpectError: regexp.MustCompile(`cpus must be between 1 and 512`)},
			{Config: vmConfig(f, f.token(t, bob, fakeoidc.TokenOptions{ExpiresIn: time.Hour}), teamA, "  cpus = 2"),
				ExpectError: regexp.MustCompile(`refused the change \(403\)`)},
		},
	})
}

// TestTerraformSnapshotsAVM: a hyperfleet_vm_snapshot of a hyperfleet_vm is a MachineSnapshot
// taken and waited for, a second plan is empty, it imports by namespace/vm/name, and destroying
// it removes the hypervisor's snapshot.
func TestTerraformSnapshotsAVM(t *testing.T) {
	terraformBinary(t)
	g := NewWithT(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t)
	hypervisorCluster(t, sim, teamA, "pve-tfs")
	f := startConsole(t)
	tok := f.token(t, alice, fakeoidc.TokenOptions{ExpiresIn: time.Hour})
	g.Eventually(func(g Gomega) {
		r := f.call(t, http.MethodGet, "/api/v1/hosts?namespace="+teamA, tok, nil)
		var hosts console.List[console.Host]
		r.decode(t, &hosts)
		g.Expect(hosts.Items).To(ContainElement(HaveField("Cluster", "pve-tfs")))
	}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
	snapshot := `
resource "hyperfleet_vm_snapshot" "before" {
  namespace   = hyperfleet_vm.db.namespace
  vm          = hyperfleet_vm.db.name
  name        = "before-upgrade"
  with_memory = true
  description = "before the upgrade"
}`
	var vmID string
	snapshotsOnSim := func(want int) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			if vmID == "" {
				vmID = s.RootModule().Resources["hyperfleet_vm.db"].Primary.Attributes["vm_id"]
			}
			vm, ok := sim.VM(vmidOf(vmID))
			if !ok {
				return fmt.Errorf("VM %s is not on the simulator", vmID)
			}
			if len(vm.Snapshots) != want {
				return fmt.Errorf("VM %s has snapshots %v, want %d", vmID, vm.Snapshots, want)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{
				Config: strings.ReplaceAll(vmConfig(f, tok, teamA, "  cpus = 2"), `"pve-tf"`, `"pve-tfs"`) + snapshot,
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttr("hyperfleet_vm_snapshot.before", "id", teamA+"/tf-vm/before-upgrade"),
					resource.TestCheckResourceAttr("hyperfleet_vm_snapshot.before", "ready_to_use", "true"),
					resource.TestCheckResourceAttr("hyperfleet_vm_snapshot.before", "phase", "Succeeded"),
					resource.TestCheckResourceAttrSet("hyperfleet_vm_snapshot.before", "hypervisor_name"),
					snapshotsOnSim(1),
				),
			},
			{Config: strings.ReplaceAll(vmConfig(f, tok, teamA, "  cpus = 2"), `"pve-tf"`, `"pve-tfs"`) + snapshot, PlanOnly: true},
			{ResourceName: "hyperfleet_vm_snapshot.before", ImportState: true, ImportStateId: teamA + "/tf-vm/before-upgrade", ImportStateVerify: true},
			{Config: strings.ReplaceAll(vmConfig(f, tok, teamA, "  cpus = 2"), `"pve-tf"`, `"pve-tfs"`), Check: snapshotsOnSim(0)},
		},
	})
}

// TestTerraformScalesAPool: hyperfleet_pool_scale sets a RunnerPool's size through its scale
// subresource, changes it in place, refuses a size beyond the pool's bounds on the replicas
// attribute, imports by kind/namespace/name, and leaves the pool at its size when destroyed.
func TestTerraformScalesAPool(t *testing.T) {
	terraformBinary(t)
	g := NewWithT(t)
	ctx := context.Background()
	f := startConsole(t)
	tok := f.token(t, alice, fakeoidc.TokenOptions{ExpiresIn: time.Hour})
	p := builder.NewRunnerPool("tf-pool", teamA).WithCluster("fleet").WithBounds(1, 4).WithLabels("linux", "x64").Build()
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	config := func(n int) string {
		return fmt.Sprintf(`
provider "hyperfleet" {
  endpoint            = %q
  token               = %q
  allow_insecure_http = true
}

resource "hyperfleet_pool_scale" "runners" {
  namespace = %q
  name      = "tf-pool"
  replicas  = %d
}
`, f.URL, tok, teamA, n)
	}
	specReplicas := func(want int32) resource.TestCheckFunc {
		return func(*terraform.State) error {
			got := &fleetv1.RunnerPool{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
				return err
			}
			if got.Spec.Replicas == nil || *got.Spec.Replicas != want {
				return fmt.Errorf("spec.replicas %v, want %d", got.Spec.Replicas, want)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providers,
		Steps: []resource.TestStep{
			{Config: config(3), Check: resource.ComposeAggregateTestCheckFunc(
				resource.TestCheckResourceAttr("hyperfleet_pool_scale.runners", "id", "RunnerPool/"+teamA+"/tf-pool"),
				specReplicas(3))},
			{Config: config(3), PlanOnly: true},
			{Config: config(2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("hyperfleet_pool_scale.runners", plancheck.ResourceActionUpdate)}},
				Check: specReplicas(2)},
			{Config: config(9), ExpectError: regexp.MustCompile(`replicas must be between the pool's minReplicas 1 and maxReplicas 4`)},
			{ResourceName: "hyperfleet_pool_scale.runners", ImportState: true, ImportStateId: "RunnerPool/" + teamA + "/tf-pool",
				ImportStateVerify: true, ImportStateVerifyIgnore: []string{"current_replicas", "ready_replicas"}},
		},
		CheckDestroy: specReplicas(2),
	})
}
