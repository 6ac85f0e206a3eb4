package proxmox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

const (
	clusterA = "fleet/pve-a"
	clusterB = "fleet/pve-b"
	// The default inventory's runner template and foreign VMs.
	templateID     = 9000
	foreignStopped = 102 // pve3, tags dev;team-a
	foreignRunning = 100 // pve1, untagged
	// testInstallation is the installation ID of the test providers unless a test sets another.
	testInstallation = "0123456789abcdef"
)

// startSim starts a fast simulator: short tasks and boots keep the suite quick.
func startSim(t testing.TB, cfg pvesim.Config) *pvesim.Simulator {
	t.Helper()
	if cfg.TaskDuration == 0 {
		cfg.TaskDuration = 5 * time.Millisecond
	}
	if cfg.BootDelay == 0 {
		cfg.BootDelay = 10 * time.Millisecond
	}
	return pvesim.StartForTest(t, cfg)
}

// newTestProvider builds a provider for cluster trusting the simulator's CA.
func newTestProvider(t testing.TB, sim *pvesim.Simulator, cluster string, mutate ...func(*Config)) *Provider {
	t.Helper()
	cfg := Config{
		Endpoint: sim.URL(), TokenID: pvesim.TestTokenID, TokenSecret: pvesim.TestTokenSecret,
		CABundle: sim.CACertPEM(), Cluster: cluster, InstallationID: testInstallation, Timeout: 5 * time.Second, TaskPollInterval: 2 * time.Millisecond,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("new provider: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func ownerFor(cluster, name string) hypervisor.Ownership {
	return hypervisor.Ownership{Cluster: cluster, ClaimNamespace: "runners", ClaimName: name, ClaimID: "id-" + name}
}

// waitTaskDone polls a task the way a controller does, until it ends, and returns its error.
func waitTaskDone(t testing.TB, p hypervisor.Provider, id hypervisor.TaskID) error {
	t.Helper()
	err := pollTask(testCtx(t), p, id)
	if errors.Is(err, errPolling) {
		t.Fatal(err)
	}
	return err
}

var errPolling = errors.New("polling failed")

// pollTask polls a task until it ends and returns the task's error, or errPolling when the task
// could not be polled or did not end in time.
func pollTask(ctx context.Context, p hypervisor.Provider, id hypervisor.TaskID) error {
	for {
		st, err := p.TaskStatus(ctx, "", id)
		if err != nil {
			return fmt.Errorf("%w: task status %s: %v", errPolling, id, err)
		}
		if st.Done {
			return st.Err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: task %s did not finish", errPolling, id)
		case <-time.After(3 * time.Millisecond):
		}
	}
}

// cloneOwned clones the runner template to vmid on pve1 for owner and tags it with Configure.
func cloneOwned(t testing.TB, p *Provider, vmid int, owner hypervisor.Ownership) hypervisor.VMRef {
	t.Helper()
	g := NewWithT(t)
	ctx := testCtx(t)
	ref := hypervisor.VMRef{Node: "pve1", ID: idOf(vmid)}
	_, task, err := p.Clone(ctx, hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "pve1", ID: idOf(templateID)}, Target: ref,
		Name: owner.ClaimName, Owner: owner})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(waitTaskDone(t, p, task)).To(Succeed())
	_, err = p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 2, MemoryMiB: 2048})
	g.Expect(err).NotTo(HaveOccurred())
	return ref
}

func simVM(t testing.TB, sim *pvesim.Simulator, vmid int) pvesim.VM {
	t.Helper()
	vm, ok := sim.VM(vmid)
	if !ok {
		t.Fatalf("simulator has no VM %d", vmid)
	}
	return vm
}

// idOf is a VMID as a VM ID.
func idOf(vmid int) string { return strconv.Itoa(vmid) }

// vmidOf is the VMID of a Proxmox VM ID, for the simulator's calls; 0 while there is none.
func vmidOf(id string) int {
	if id == "" {
		return 0
	}
	n, err := strconv.Atoi(id)
	if err != nil {
		panic(fmt.Sprintf("VM ID %q is not a VMID", id))
	}
	return n
}
