package proxmox

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// TestSimulatedFaultsAreClassified produces each error class with the simulator's fault injection
// (or its faithful behaviour) and checks the class the controllers will see.
func TestSimulatedFaultsAreClassified(t *testing.T) {
	const vmid = 900
	for _, tc := range []struct {
		name  string
		fault pvesim.Fault
		call  func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error
		want  error
	}{
		{
			name:  "locked VM",
			fault: pvesim.Fault{Endpoint: "PUT /nodes/{node}/qemu/{vmid}/config", Status: 500, Message: "VM 900 is locked (clone)"},
			call: func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
				_, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 2})
				return err
			},
			want: hypervisor.ErrBusy,
		},
		{
			name:  "401",
			fault: pvesim.Fault{Endpoint: "GET /nodes/{node}/qemu/{vmid}/status/current", Status: 401, Message: "authentication failure"},
			call: func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
				_, err := p.VM(ctx, ref)
				return err
			},
			want: hypervisor.ErrUnauthorized,
		},
		{
			name:  "403",
			fault: pvesim.Fault{Endpoint: "POST /nodes/{node}/qemu/{vmid}/status/start", Status: 403, Message: "Permission check failed (/vms/900, VM.PowerMgmt)"},
			call: func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
				_, err := p.Start(ctx, ref)
				return err
			},
			want: hypervisor.ErrForbidden,
		},
		{
			name: "400 invalid",
			fault: pvesim.Fault{Endpoint: "PUT /nodes/{node}/qemu/{vmid}/config", Status: 400, Message: "Parameter verification failed.",
				Errors: map[string]string{"cores": "value must have a minimum value of 1"}},
			call: func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
				_, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{Cores: 2})
				return err
			},
			want: hypervisor.ErrInvalid,
		},
		{
			name:  "500 transient",
			fault: pvesim.Fault{Endpoint: "GET /cluster/resources", Status: 500, Message: "Internal Server Error"},
			call: func(ctx context.Context, p *Provider, _ hypervisor.VMRef) error {
				_, err := p.OwnedVMs(ctx)
				return err
			},
			want: hypervisor.ErrTransient,
		},
		{
			name:  "596 transient",
			fault: pvesim.Fault{Endpoint: "POST /nodes/{node}/qemu/{vmid}/status/start", Status: 596, Message: "Connection timed out"},
			call: func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
				_, err := p.Start(ctx, ref)
				return err
			},
			want: hypervisor.ErrTransient,
		},
		{
			name:  "failing resize task",
			fault: pvesim.Fault{Endpoint: "PUT /nodes/{node}/qemu/{vmid}/resize", TaskExitStatus: "resize failed: storage full"},
			call: func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
				task, err := p.Configure(ctx, ref, hypervisor.ConfigSpec{Disk: &hypervisor.DiskSpec{Name: "scsi0", SizeGiB: 64}})
				if err != nil {
					return err
				}
				return pollTask(ctx, p, task)
			},
			want: hypervisor.ErrTaskFailed,
		},
		{
			name:  "hung request",
			fault: pvesim.Fault{Endpoint: "GET /cluster/resources", Hang: true},
			call: func(ctx context.Context, p *Provider, _ hypervisor.VMRef) error {
				_, err := p.OwnedVMs(ctx)
				return err
			},
			want: hypervisor.ErrTransient,
		},
		{
			name: "missing VM",
			call: func(ctx context.Context, p *Provider, _ hypervisor.VMRef) error {
				_, err := p.VM(ctx, hypervisor.VMRef{Node: "pve1", ID: "4242"})
				return err
			},
			want: hypervisor.ErrNotFound,
		},
		{
			name: "VMID taken",
			call: func(ctx context.Context, p *Provider, _ hypervisor.VMRef) error {
				_, _, err := p.Clone(ctx, hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "pve1", ID: idOf(templateID)},
					Target: hypervisor.VMRef{Node: "pve1", ID: idOf(foreignRunning)}, Owner: ownerFor(clusterA, "x")})
				return err
			},
			want: hypervisor.ErrAlreadyExists,
		},
		{
			name:  "node offline",
			fault: pvesim.Fault{Endpoint: "GET /nodes/{node}/qemu/{vmid}/status/current", Status: 595, Message: "No route to host"},
			call: func(ctx context.Context, p *Provider, ref hypervisor.VMRef) error {
				_, err := p.VM(ctx, ref)
				return err
			},
			want: hypervisor.ErrTransient,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sim := startSim(t, pvesim.Config{})
			p := newTestProvider(t, sim, clusterA, func(c *Config) { c.Timeout = 300 * time.Millisecond })
			ref := cloneOwned(t, p, vmid, ownerFor(clusterA, "faulty"))
			if tc.fault.Status != 0 || tc.fault.Hang || tc.fault.TaskExitStatus != "" {
				sim.InjectFault(tc.fault)
			}
			start := time.Now()
			err := tc.call(testCtx(t), p, ref)
			g.Expect(err).To(MatchError(tc.want))
			g.Expect(hypervisor.IsRetryable(err)).To(Equal(tc.want == hypervisor.ErrBusy || tc.want == hypervisor.ErrTransient))
			g.Expect(time.Since(start)).To(BeNumerically("<", 3*time.Second), "every call is bounded by the timeout")
		})
	}
}

// TestFailedCloneTaskIsReported: go-proxmox's Task.Wait calls a failed task done; TaskStatus must
// report the exit status as ErrTaskFailed.
func TestFailedCloneTaskIsReported(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{})
	p := newTestProvider(t, sim, clusterA)
	sim.InjectFault(pvesim.Fault{Endpoint: "POST /nodes/{node}/qemu/{vmid}/clone", TaskExitStatus: "clone failed: out of space"})
	_, task, err := p.Clone(testCtx(t), hypervisor.CloneSpec{Source: hypervisor.VMRef{Node: "pve1", ID: idOf(templateID)},
		Target: hypervisor.VMRef{Node: "pve1", ID: "901"}, Owner: ownerFor(clusterA, "doomed")})
	g.Expect(err).NotTo(HaveOccurred())
	err = waitTaskDone(t, p, task)
	g.Expect(err).To(MatchError(hypervisor.ErrTaskFailed))
	g.Expect(err.Error()).To(ContainSubstring("clone failed: out of space"))
	_, exists := sim.VM(901)
	g.Expect(exists).To(BeFalse())
}

// TestVerifyNamesMissingPrivileges uses a token with too few privileges.
func TestVerifyNamesMissingPrivileges(t *testing.T) {
	g := NewWithT(t)
	sim := startSim(t, pvesim.Config{Tokens: []pvesim.Token{{ID: pvesim.TestTokenID, Secret: pvesim.TestTokenSecret,
		Privileges: []string{"VM.Audit", "Sys.Audit", "VM.Allocate", "VM.Clone"}}}})
	p := newTestProvider(t, sim, clusterA)
	_, err := p.Verify(testCtx(t))
	g.Expect(err).To(MatchError(hypervisor.ErrForbidden))
	g.Expect(err.Error()).To(ContainSubstring("VM.PowerMgmt on /vms"))
	g.Expect(err.Error()).To(ContainSubstring("Datastore.AllocateTemplate on /storage/local"))
	g.Expect(err.Error()).NotTo(ContainSubstring("VM.Clone"))

	wrong := newTestProvider(t, sim, clusterA, func(c *Config) { c.TokenSecret = "wrong" })
	_, err = wrong.Verify(testCtx(t))
	g.Expect(err).To(MatchError(hypervisor.ErrUnauthorized))
}

// TestVerifyReportsMissingFeaturePrivileges: a token with every privilege runners need but none of
// long-lived VMs' features passes Verify, and the privileges those features lack are reported
// with the feature; a token with them all reports none, and nothing is known before a Verify.
func TestVerifyReportsMissingFeaturePrivileges(t *testing.T) {
	g := NewWithT(t)
	runnerPrivs := []string{"VM.Allocate", "VM.Clone", "VM.Audit", "VM.PowerMgmt", "VM.Config.CPU", "VM.Config.Memory",
		"VM.Config.Network", "VM.Config.Options", "VM.Config.Disk", "VM.Config.CDROM", "VM.GuestAgent.Audit",
		"Datastore.AllocateSpace", "Datastore.AllocateTemplate", "Datastore.Allocate", "Sys.Audit", "SDN.Use"}
	sim := startSim(t, pvesim.Config{Tokens: []pvesim.Token{{ID: pvesim.TestTokenID, Secret: pvesim.TestTokenSecret, Privileges: runnerPrivs}}})
	p := newTestProvider(t, sim, clusterA)
	_, known := p.MissingFeaturePrivileges()
	g.Expect(known).To(BeFalse(), "nothing is known before Verify")
	_, err := p.Verify(testCtx(t))
	g.Expect(err).NotTo(HaveOccurred(), "runners need none of them")
	missing, known := p.MissingFeaturePrivileges()
	g.Expect(known).To(BeTrue())
	g.Expect(missing).To(ConsistOf(
		"VM.Snapshot on /vms (MachineSnapshots and their schedules)",
		"VM.Snapshot.Rollback on /vms (MachineSnapshotRestores)",
		"VM.GuestAgent.Unrestricted|VM.Monitor on /vms (preStart and preStop hooks)",
		"VM.Migrate on /vms (MachineMigrations, host drains and the LiveMigratable condition)"))

	full := startSim(t, pvesim.Config{Tokens: []pvesim.Token{{ID: pvesim.TestTokenID, Secret: pvesim.TestTokenSecret,
		Privileges: append(runnerPrivs, "VM.Snapshot", "VM.Snapshot.Rollback", "VM.GuestAgent.Unrestricted", "VM.Migrate")}}})
	p = newTestProvider(t, full, clusterA)
	_, err = p.Verify(testCtx(t))
	g.Expect(err).NotTo(HaveOccurred())
	missing, known = p.MissingFeaturePrivileges()
	g.Expect(known).To(BeTrue())
	g.Expect(missing).To(BeEmpty())
}
