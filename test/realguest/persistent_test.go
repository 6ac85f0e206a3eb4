package realguest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
)

// persistentUserData counts the guest's boots on its own disk: bootcmd runs on every boot, where
// runcmd runs once per instance.
const persistentUserData = `#cloud-config
bootcmd:
- [sh, -c, 'echo boot >> /var/lib/hf-boots']
`

// TestPersistentVMOnARealGuest runs a long-lived VM of the runner template under the run
// strategies, with the real guest doing what a guest does: its guest agent's addresses reach the
// claim's status; a poweroff typed inside the guest leaves it off under RerunOnFailure (the
// guest shut itself down) and, once the strategy is Always, HyperFleet starts it again from the
// same disk (the guest counts two boots); under Halted the preStop hook runs through the real
// guest agent before the guest is asked to shut down, and the VM stops as Requested; deleting the
// claim destroys the VM.
func TestPersistentVMOnARealGuest(t *testing.T) {
	if skipReason != "" {
		t.Skip(skipReason)
	}
	t.Parallel() // beside the runner's guest: two vCPUs of TCG on two cores
	g := NewWithT(t)
	startFleet(t)
	ctx := context.Background()
	c := fleet.Client()
	claim := &infrav1.MachineClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "cache-0", Namespace: fleet.State.Namespace},
		Spec: infrav1.MachineClaimSpec{
			HypervisorClusterName: devfleet.HypervisorClusterName,
			Template:              infrav1.TemplateSource{ID: strconv.Itoa(devfleet.RunnerTemplateVMID)},
			CloneMode:             infrav1.CloneLinked, Cores: 1, MemoryMiB: 1024,
			Network:   &infrav1.NetworkSpec{Name: "vmbr0"},
			CloudInit: &infrav1.CloudInitSpec{UserData: persistentUserData},
			MachineClaimLifecycleSpec: infrav1.MachineClaimLifecycleSpec{
				Lifecycle: infrav1.LifecyclePersistent, RunStrategy: infrav1.RunStrategyRerunOnFailure,
				TerminationGracePeriodSeconds: ptrTo(int32(240)),
				Hooks: &infrav1.LifecycleHooks{PreStop: &infrav1.LifecycleHook{
					// Succeeds only in the guest that counted its boots.
					Command: []string{"grep", "-q", "boot", "/var/lib/hf-boots"}, TimeoutSeconds: 60,
				}},
			},
		},
	}
	g.Expect(c.Create(ctx, claim)).To(Succeed())
	key := client.ObjectKeyFromObject(claim)
	created := time.Now()

	var vmid int
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, key, claim)).To(Succeed())
		g.Expect(claim.Status.VMID).NotTo(BeEmpty())
		var err error
		vmid, err = strconv.Atoi(claim.Status.VMID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(claim.Status.Addresses).To(ContainElement(HaveField("Address", "10.0.2.15")))
	}, guestBound, time.Second).Should(Succeed(), "the VM boots and its guest agent's addresses reach the claim (console: %s)", fleet.Simulator.GuestConsoleLog(vmid))
	t.Logf("VM %d: guest agent addresses in the claim's status %s after the claim was created", vmid, time.Since(created).Round(time.Second))

	vm := proxmoxVM(ctx, g, vmid)
	g.Eventually(func(g Gomega) {
		g.Expect(guestRun(ctx, g, vm, "cat", "/var/lib/hf-boots")).To(Equal("boot"))
	}, guestBound, 2*time.Second).Should(Succeed(), "cloud-init's bootcmd ran once")

	// A poweroff typed in the guest: no task on the hypervisor, so HyperFleet reads it as the
	// guest's own shutdown, and RerunOnFailure leaves the VM off.
	_, err := vm.AgentExec(ctx, []string{"systemctl", "poweroff"}, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, key, claim)).To(Succeed())
		g.Expect(claim.Status.LastStopCause).To(Equal(infrav1.StopCauseGuestShutdown))
	}, guestBound, time.Second).Should(Succeed(), "the guest's own poweroff is seen as GuestShutdown")
	g.Consistently(func(g Gomega) {
		state, ok := fleet.Simulator.VM(vmid)
		g.Expect(ok).To(BeTrue())
		g.Expect(state.Status).To(Equal("stopped"))
		g.Expect(c.Get(ctx, key, claim)).To(Succeed())
		g.Expect(claim.Status.RestartCount).To(BeZero())
	}, 10*time.Second, time.Second).Should(Succeed(), "RerunOnFailure does not start a VM whose guest shut itself down")

	// Always starts it again, however it stopped: the same disk, a second boot.
	restarted := time.Now()
	g.Expect(c.Get(ctx, key, claim)).To(Succeed())
	claim.Spec.RunStrategy = infrav1.RunStrategyAlways
	g.Expect(c.Update(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, key, claim)).To(Succeed())
		g.Expect(claim.Status.RestartCount).To(BeEquivalentTo(1))
		g.Expect(guestRun(ctx, g, vm, "cat", "/var/lib/hf-boots")).To(Equal("boot\nboot"))
	}, guestBound, 2*time.Second).Should(Succeed(), "Always starts the VM again and the guest boots from its own disk (console: %s)", fleet.Simulator.GuestConsoleLog(vmid))
	t.Logf("restarted under Always: the guest's second boot done %s after the change", time.Since(restarted).Round(time.Second))

	// Halted: the preStop hook through the real guest agent, then the guest's shutdown.
	halted := time.Now()
	g.Expect(c.Get(ctx, key, claim)).To(Succeed())
	claim.Spec.RunStrategy = infrav1.RunStrategyHalted
	g.Expect(c.Update(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, key, claim)).To(Succeed())
		g.Expect(claim.Status.LastStopCause).To(Equal(infrav1.StopCauseRequested))
		state, ok := fleet.Simulator.VM(vmid)
		g.Expect(ok).To(BeTrue())
		g.Expect(state.Status).To(Equal("stopped"))
	}, guestBound, time.Second).Should(Succeed(), "Halted stops the VM (console: %s)", fleet.Simulator.GuestConsoleLog(vmid))
	t.Logf("stopped under Halted %s after the change", time.Since(halted).Round(time.Second))
	g.Expect(claimEvents(ctx, g, claim, infrav1.HookSucceededEventReason)).To(ContainElement(HavePrefix("PreStop hook")),
		"the preStop hook succeeded in the guest before the stop")

	g.Expect(c.Delete(ctx, claim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, exists := fleet.Simulator.VM(vmid)
		g.Expect(exists).To(BeFalse())
		g.Expect(apierrors.IsNotFound(c.Get(ctx, key, &infrav1.MachineClaim{}))).To(BeTrue())
	}, 2*time.Minute, time.Second).Should(Succeed(), "deleting the claim destroys the VM")
}

// proxmoxVM is the VM as a person's go-proxmox sees it, signed in with the fleet's token.
func proxmoxVM(ctx context.Context, g *WithT, vmid int) *proxmox.VirtualMachine {
	p := fleet.State.Proxmox
	ca, err := os.ReadFile(p.CAFile)
	g.Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	pc := proxmox.NewClient(p.URL, proxmox.WithHTTPClient(hc), proxmox.WithAPIToken(p.TokenID, p.TokenSecret))
	state, ok := fleet.Simulator.VM(vmid)
	g.Expect(ok).To(BeTrue())
	node, err := pc.Node(ctx, state.Node)
	g.Expect(err).NotTo(HaveOccurred())
	vm, err := node.VirtualMachine(ctx, vmid)
	g.Expect(err).NotTo(HaveOccurred())
	return vm
}

// guestRun runs a command in the guest through its guest agent and returns its trimmed output;
// it fails g unless the command exits 0.
func guestRun(ctx context.Context, g Gomega, vm *proxmox.VirtualMachine, command ...string) string {
	pid, err := vm.AgentExec(ctx, command, "")
	g.Expect(err).NotTo(HaveOccurred())
	var st *proxmox.AgentExecStatus
	g.Eventually(func(g Gomega) {
		st, err = vm.AgentExecStatus(ctx, pid)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(st.Exited).To(Equal(1))
	}, 30*time.Second, time.Second).Should(Succeed())
	g.Expect(st.ExitCode).To(Equal(0), "%v: %s", command, st.ErrData)
	return strings.TrimSpace(st.OutData)
}

// claimEvents are the messages of the claim's Events with reason.
func claimEvents(ctx context.Context, g *WithT, claim *infrav1.MachineClaim, reason string) []string {
	var events corev1.EventList
	g.Expect(fleet.Client().List(ctx, &events, client.InNamespace(claim.Namespace))).To(Succeed())
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.UID == claim.UID && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
