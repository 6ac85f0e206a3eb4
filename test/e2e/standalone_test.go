package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
)

// standaloneManifest is one VM without Cluster API, as a person would kubectl apply it.
const standaloneManifest = `apiVersion: v1
kind: Secret
metadata:
  name: debug-vm-userdata
  namespace: %[1]s
stringData:
  value: |
    #cloud-config
    hostname: debug-vm
---
apiVersion: infrastructure.cluster.x-k8s.io/v1alpha1
kind: MachineClaim
metadata:
  name: debug-vm
  namespace: %[1]s
spec:
  hypervisorClusterName: %[2]s
  template:
    id: "%[3]d"
  cores: 1
  memoryMiB: 1024
  bootstrap:
    dataSecretName: debug-vm-userdata
`

// TestStandaloneMachineClaimWithKubectl applies a single MachineClaim with kubectl: it becomes a
// running VM, and deleting it removes the VM.
func TestStandaloneMachineClaimWithKubectl(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := fleet.State
	manifest := filepath.Join(t.TempDir(), "debug-vm.yaml")
	g.Expect(os.WriteFile(manifest, []byte(fmt.Sprintf(standaloneManifest, s.Namespace, devfleet.HypervisorClusterName, devfleet.RunnerTemplateVMID)), 0o600)).To(Succeed())
	kubectl := func(args ...string) string {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, s.Kubectl, append([]string{"--kubeconfig", s.Kubeconfig}, args...)...).CombinedOutput()
		g.Expect(err).NotTo(HaveOccurred(), string(out))
		return string(out)
	}

	t.Log(kubectl("apply", "-f", manifest))
	claim := &infrav1.MachineClaim{}
	key := client.ObjectKey{Namespace: s.Namespace, Name: "debug-vm"}
	g.Eventually(func(g Gomega) {
		g.Expect(fleet.Client().Get(ctx, key, claim)).To(Succeed())
		g.Expect(claim.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady))
		vm, ok := fleet.Simulator.VM(vmidOf(claim.Status.VMID))
		g.Expect(ok).To(BeTrue())
		g.Expect(vm.Status).To(Equal("running"))
		g.Expect(vm.Cores).To(Equal(1))
	}, 90*time.Second, 250*time.Millisecond).Should(Succeed(), "the claim becomes a running VM")
	vmid := vmidOf(claim.Status.VMID)
	t.Log(kubectl("get", "machineclaim", "-n", s.Namespace, "debug-vm"))

	t.Log(kubectl("delete", "-f", manifest, "--wait=false"))
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(fleet.Client().Get(ctx, key, claim))).To(BeTrue(), "the claim is gone")
		_, exists := fleet.Simulator.VM(vmid)
		g.Expect(exists).To(BeFalse(), "its VM is gone")
	}, 90*time.Second, 250*time.Millisecond).Should(Succeed())
}
