package controllers_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestMetricsDuringProvisioning scrapes the manager's /metrics while a VM is provisioned and finds
// the series an operator's dashboards use.
func TestMetricsDuringProvisioning(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sim := pvesim.StartForTest(t, pvesim.Config{})
	addr := freeAddr(t)
	startManagerWith(t, func(c *config.Manager) { c.MetricsBindAddress, c.MetricsSecure = addr, false })
	ns := newNamespace(t)
	proxmoxCluster(t, ns, "metrics-pve", sim)
	claim := builder.NewMachineClaim("vm", ns).WithHypervisorCluster("metrics-pve").Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(get(g, claim).Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	resp, err := http.Get("http://" + addr + "/metrics")
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	text := string(body)
	for _, series := range []string{
		`hyperfleet_vm_provisioning_duration_seconds_count{hypervisor_cluster="metrics-pve"}`,
		`hyperfleet_vm_provisioning_total{hypervisor_cluster="metrics-pve",reason="",result="success"} 1`,
		`hyperfleet_hypervisor_api_request_duration_seconds_count{code="ok",operation="Clone",provider="proxmox"}`,
		`hyperfleet_hypervisor_task_duration_seconds_count{provider="proxmox",type="Clone"}`,
		// The deprecated names keep their series for one release.
		`hyperfleet_proxmox_api_request_duration_seconds_count{code="ok",operation="Clone"}`,
		`hyperfleet_proxmox_task_duration_seconds_count{type="Clone"}`,
		`controller_runtime_reconcile_total{controller="machineclaim"`,
	} {
		g.Expect(text).To(ContainSubstring(series))
	}
}
