package vsphere_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/vsphere"
	"github.com/hyperfleet-io/hyperfleet/test/vspheresim"
)

func newProvider(t *testing.T, sim *vspheresim.Simulator, installation string) *vsphere.Provider {
	t.Helper()
	p, err := vsphere.New(vsphere.Config{Endpoint: sim.URL, Username: sim.Username, Password: sim.Password, CABundle: sim.CA,
		Cluster: "fleet/vsphere", InstallationID: installation, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// wait polls a task until it is done and fails the test on its error.
func wait(t *testing.T, p hypervisor.Provider, id hypervisor.TaskID) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := p.TaskStatus(context.Background(), "", id)
		if err != nil {
			t.Fatalf("task %s: %v", id, err)
		}
		if st.Done {
			if st.Err != nil {
				t.Fatalf("task %s failed: %v", id, st.Err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s still running", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLifecycleAgainstVCSim drives one VM's whole life through govmomi's client against VMware's
// simulator over HTTPS: the template on every host, a clone stamped with the installation's marks,
// configuration with cloud-init data as guestinfo, start, an address from VMware Tools, the spent
// bootstrap data removed, stop and delete.
func TestLifecycleAgainstVCSim(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	p := newProvider(t, sim, "inst0000a")

	version, err := p.Verify(ctx)
	if err != nil || !strings.Contains(version, "vCenter") {
		t.Fatalf("Verify: %q, %v", version, err)
	}
	nodes, err := p.Nodes(ctx)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("Nodes: %+v, %v", nodes, err)
	}
	for _, n := range nodes {
		if !n.Online || n.MemoryTotal == 0 || n.MemoryFree == 0 || n.MemoryFree > n.MemoryTotal {
			t.Errorf("node %+v", n)
		}
	}
	templates, err := p.ResolveTemplates(ctx, hypervisor.TemplateSelector{Name: "ubuntu-2404-runner", Tags: []string{"runner"}})
	if err != nil || len(templates) != 3 {
		t.Fatalf("ResolveTemplates: %+v, %v", templates, err)
	}
	for _, tmpl := range templates {
		if !strings.HasPrefix(tmpl.Digest, "changeVersion:") || tmpl.Digest == "changeVersion:" {
			t.Errorf("template %s has no config version for the job's record: %q", tmpl.Ref.ID, tmpl.Digest)
		}
	}
	if _, err := p.ResolveTemplates(ctx, hypervisor.TemplateSelector{Name: "ubuntu-2404-runner", Tags: []string{"gpu"}}); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("a tag the template lacks: %v", err)
	}
	target := templates[1]

	owner := hypervisor.Ownership{ClaimNamespace: "fleet", ClaimName: "runner-1", ClaimID: "c0ffee"}
	ref, task, err := p.Clone(ctx, hypervisor.CloneSpec{Source: target.Ref, Target: hypervisor.VMRef{Node: target.Ref.Node}, Name: "runner-1", Owner: owner})
	if err != nil || ref.ID == "" || ref.Node != target.Ref.Node || task == "" {
		t.Fatalf("Clone: %+v %q %v", ref, task, err)
	}
	wait(t, p, task)
	vm, err := p.VM(ctx, ref)
	if err != nil || vm.Owner == nil || vm.Owner.ClaimID != "c0ffee" || vm.State != hypervisor.PowerStateStopped || vm.Ref.Node != target.Ref.Node {
		t.Fatalf("VM after clone: %+v %v", vm, err)
	}

	spec := hypervisor.ConfigSpec{Cores: 2, MemoryMiB: 2048, Tags: []string{"pool-a"},
		CloudInit: &hypervisor.CloudInitData{UserData: "#cloud-config\nruncmd: [echo hi]\n", MetaData: "instance-id: runner-1\n", NetworkConfig: "version: 2\n"}}
	proven := false
	spec.Proven = func() { proven = true }
	task, err = p.Configure(ctx, ref, spec)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	if !proven {
		t.Error("Configure did not report the clone proven over")
	}
	held := simVM(t, sim, ref.ID)
	if got, _ := base64.StdEncoding.DecodeString(held.ExtraConfig["guestinfo.userdata"]); string(got) != spec.CloudInit.UserData {
		t.Errorf("guestinfo.userdata: %q", got)
	}
	if held.ExtraConfig["guestinfo.userdata.encoding"] != "base64" || held.ExtraConfig["hyperfleet.tags"] != "pool-a" {
		t.Errorf("extra config: %v", held.ExtraConfig)
	}
	if meta, _ := base64.StdEncoding.DecodeString(held.ExtraConfig["guestinfo.metadata"]); !strings.Contains(string(meta), "network.encoding: base64") {
		t.Errorf("the network config is not in the metadata: %q", meta)
	}
	if vm, _ := p.VM(ctx, ref); vm.Cores != 2 || vm.MemoryMiB != 2048 {
		t.Errorf("hardware: %+v", vm)
	}

	task, err = p.Start(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	var addrs []hypervisor.Address
	for deadline := time.Now().Add(10 * time.Second); len(addrs) == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if addrs, err = p.Addresses(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	if len(addrs) == 0 || !strings.HasPrefix(addrs[0].Address, "10.56.") {
		t.Fatalf("addresses: %+v", addrs)
	}

	if err := p.EjectCloudInit(ctx, ref); err != nil {
		t.Fatal(err)
	}
	for k := range simVM(t, sim, ref.ID).ExtraConfig {
		if strings.HasPrefix(k, "guestinfo.") {
			t.Errorf("the spent bootstrap data is still readable: %s", k)
		}
	}

	if _, err := p.Delete(ctx, ref); !errors.Is(err, hypervisor.ErrBusy) {
		t.Errorf("deleting a running VM: %v", err)
	}
	task, err = p.Stop(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	owned, err := p.OwnedVMs(ctx)
	if err != nil || len(owned) != 1 || owned[0].Ref.ID != ref.ID {
		t.Fatalf("OwnedVMs: %+v %v", owned, err)
	}
	task, err = p.Delete(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	if _, err := p.VM(ctx, ref); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("VM after delete: %v", err)
	}
}

// TestForeignVMsAreOnlyRead plays another installation with same-named objects and a VM nobody
// made through HyperFleet: neither is listed as ours, and every change to them is refused
// without touching them.
func TestForeignVMsAreOnlyRead(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	ours := newProvider(t, sim, "inst0000a")
	theirs := newProvider(t, sim, "inst0000b") // same HypervisorCluster namespace/name, another installation

	tmpl, err := theirs.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: "ubuntu-2404-runner"})
	if err != nil {
		t.Fatal(err)
	}
	ref, task, err := theirs.Clone(ctx, hypervisor.CloneSpec{Source: tmpl.Ref, Target: hypervisor.VMRef{Node: tmpl.Ref.Node}, Name: "runner-1",
		Owner: hypervisor.Ownership{ClaimNamespace: "fleet", ClaimName: "runner-1", ClaimID: "c0ffee"}})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, theirs, task)
	task, err = theirs.Start(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, theirs, task)

	owned, err := ours.OwnedVMs(ctx)
	if err != nil || len(owned) != 0 {
		t.Fatalf("another installation's VM listed as ours: %+v %v", owned, err)
	}
	var plain hypervisor.VMRef
	for _, v := range sim.VMs() {
		if !v.Template && v.ExtraConfig["hyperfleet.installation"] == "" {
			plain = hypervisor.VMRef{Node: v.Host, ID: v.InstanceUUID}
		}
	}
	if plain.ID == "" {
		t.Fatal("the simulator holds no foreign VM")
	}
	for _, target := range []hypervisor.VMRef{ref, plain, {ID: tmpl.Ref.ID}} {
		if _, err := ours.Stop(ctx, target); !errors.Is(err, hypervisor.ErrNotOwned) {
			t.Errorf("Stop %s: %v", target.ID, err)
		}
		if _, err := ours.Delete(ctx, target); !errors.Is(err, hypervisor.ErrNotOwned) {
			t.Errorf("Delete %s: %v", target.ID, err)
		}
		if _, err := ours.Configure(ctx, target, hypervisor.ConfigSpec{Cores: 8}); !errors.Is(err, hypervisor.ErrNotOwned) {
			t.Errorf("Configure %s: %v", target.ID, err)
		}
		if err := ours.EjectCloudInit(ctx, target); !errors.Is(err, hypervisor.ErrNotOwned) {
			t.Errorf("EjectCloudInit %s: %v", target.ID, err)
		}
	}
	if v := simVM(t, sim, ref.ID); v.PowerState != "poweredOn" {
		t.Errorf("the other installation's VM was touched: %+v", v)
	}
}

// TestCredentialsAndCertificateAreChecked: a wrong password is ErrUnauthorized, and a vCenter
// whose certificate the configured CA does not sign is refused before any credential is sent.
func TestCredentialsAndCertificateAreChecked(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	bad, err := vsphere.New(vsphere.Config{Endpoint: sim.URL, Username: sim.Username, Password: "wrong", CABundle: sim.CA,
		Cluster: "fleet/vsphere", InstallationID: "inst0000a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bad.Verify(ctx); !errors.Is(err, hypervisor.ErrUnauthorized) {
		t.Errorf("a wrong password: %v", err)
	}
	untrusted, err := vsphere.New(vsphere.Config{Endpoint: sim.URL, Username: sim.Username, Password: sim.Password, CABundle: otherCA(t),
		Cluster: "fleet/vsphere", InstallationID: "inst0000a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := untrusted.Verify(ctx); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("a certificate the CA does not sign: %v", err)
	}
}

func simVM(t *testing.T, sim *vspheresim.Simulator, id string) vspheresim.VM {
	t.Helper()
	for _, v := range sim.VMs() {
		if v.InstanceUUID == id {
			return v
		}
	}
	t.Fatalf("the simulator holds no VM %s", id)
	return vspheresim.VM{}
}

// otherCA is a CA that signed nothing the simulator serves.
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// TestSessionEndedByVCenterLogsInAgain: vCenter ends the provider's session (an idle timeout, a
// restart); the next call logs in again and succeeds, without the caller seeing the fault.
func TestSessionEndedByVCenterLogsInAgain(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	p := newProvider(t, sim, "inst0000a")
	if _, err := p.Nodes(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sim.EndSessions(); err != nil {
		t.Fatal(err)
	}
	sim.ResetCalls()
	nodes, err := p.Nodes(ctx)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("after vCenter ended the session: %+v %v", nodes, err)
	}
	if calls := sim.Calls(); calls["Login"] != 1 {
		t.Errorf("logged in %d times: %v", calls["Login"], calls)
	}
}

// TestRefusedCallsAreClassified: a clone vCenter refuses for a missing privilege is ErrForbidden,
// one refused as busy is ErrBusy, and nothing is left behind.
func TestRefusedCallsAreClassified(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	p := newProvider(t, sim, "inst0000a")
	tmpl, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: "ubuntu-2404-runner"})
	if err != nil {
		t.Fatal(err)
	}
	spec := hypervisor.CloneSpec{Source: tmpl.Ref, Target: hypervisor.VMRef{Node: tmpl.Ref.Node}, Name: "runner-1",
		Owner: hypervisor.Ownership{ClaimNamespace: "fleet", ClaimName: "runner-1", ClaimID: "c0ffee"}}
	sim.Fail("CloneVM_Task", &types.NoPermission{PrivilegeId: "VirtualMachine.Provisioning.Clone"}, 1)
	if _, _, err := p.Clone(ctx, spec); !errors.Is(err, hypervisor.ErrForbidden) {
		t.Errorf("a clone refused for a privilege: %v", err)
	}
	sim.Fail("CloneVM_Task", &types.TaskInProgress{}, 1)
	if _, _, err := p.Clone(ctx, spec); !errors.Is(err, hypervisor.ErrBusy) {
		t.Errorf("a clone refused as busy: %v", err)
	}
	if owned, err := p.OwnedVMs(ctx); err != nil || len(owned) != 0 {
		t.Errorf("refused clones left VMs: %+v %v", owned, err)
	}
	ref, task, err := p.Clone(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	wait(t, p, task)
	if owned, err := p.OwnedVMs(ctx); err != nil || len(owned) != 1 || owned[0].Ref.ID != ref.ID {
		t.Errorf("after the refusals, one clone: %+v %v", owned, err)
	}
}

// TestHostsInMaintenanceModeAreOffline: a host an administrator put into vSphere's maintenance
// mode is reported offline, so placement sends no new VM there.
func TestHostsInMaintenanceModeAreOffline(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	p := newProvider(t, sim, "inst0000a")
	nodes, err := p.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.SetMaintenance(nodes[0].Name, true); err != nil {
		t.Fatal(err)
	}
	after, err := p.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range after {
		if n.Online == (n.Name == nodes[0].Name) {
			t.Errorf("node %s online %v", n.Name, n.Online)
		}
	}
}

// TestVCenterDownIsTransient: a vCenter that does not answer is a transient fault, retried later.
func TestVCenterDownIsTransient(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p, err := vsphere.New(vsphere.Config{Endpoint: "https://" + addr, Username: "u", Password: "p",
		Cluster: "fleet/vsphere", InstallationID: "inst0000a", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Verify(context.Background()); !errors.Is(err, hypervisor.ErrTransient) {
		t.Errorf("an unreachable vCenter: %v", err)
	}
}

// TestFailedCloneTaskIsReported: a clone vCenter accepts and then fails (the name is taken in the
// folder) is a finished task carrying ErrTaskFailed and vCenter's words.
func TestFailedCloneTaskIsReported(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{})
	p := newProvider(t, sim, "inst0000a")
	tmpl, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Name: "ubuntu-2404-runner"})
	if err != nil {
		t.Fatal(err)
	}
	spec := hypervisor.CloneSpec{Source: tmpl.Ref, Target: hypervisor.VMRef{Node: tmpl.Ref.Node}, Name: "DC0_C0_RP0_VM1",
		Owner: hypervisor.Ownership{ClaimNamespace: "fleet", ClaimName: "x", ClaimID: "x"}}
	_, task, err := p.Clone(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	var st hypervisor.TaskState
	for deadline := time.Now().Add(10 * time.Second); !st.Done && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if st, err = p.TaskStatus(ctx, "", task); err != nil {
			t.Fatal(err)
		}
	}
	if !st.Done || !errors.Is(st.Err, hypervisor.ErrTaskFailed) {
		t.Errorf("a clone onto a taken name: %+v", st)
	}
}

// TestTemplatesByVSphereTags: a template is selected by the vSphere tags attached to it through the
// vAPI (by name, or category:name) as well as by its hyperfleet.tags setting; a tag it lacks
// selects nothing.
func TestTemplatesByVSphereTags(t *testing.T) {
	ctx := context.Background()
	sim := vspheresim.StartForTest(t, vspheresim.Config{Templates: []vspheresim.Template{
		{Name: "ubuntu-2404-runner", Tags: []string{"runner"}, VSphereTags: []string{"os:ubuntu", "tier:gpu"}},
		{Name: "debian-12", VSphereTags: []string{"os:debian"}},
	}})
	p := newProvider(t, sim, "inst0000a")
	for _, sel := range [][]string{{"ubuntu"}, {"os:ubuntu"}, {"runner", "gpu"}, {"tier:gpu", "os:ubuntu"}} {
		got, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Tags: sel})
		if err != nil || got.Name != "ubuntu-2404-runner" {
			t.Errorf("tags %v: %+v %v", sel, got, err)
		}
	}
	if got, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Tags: []string{"os:debian"}}); err != nil || got.Name != "debian-12" {
		t.Errorf("os:debian: %+v %v", got, err)
	}
	if _, err := p.ResolveTemplate(ctx, hypervisor.TemplateSelector{Tags: []string{"os:windows"}}); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Errorf("a tag no template has: %v", err)
	}
}
