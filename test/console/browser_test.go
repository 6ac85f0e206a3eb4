package console

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/console"
	headless "github.com/hyperfleet-io/hyperfleet/test/browser"
	"github.com/hyperfleet-io/hyperfleet/test/builder"
	"github.com/hyperfleet-io/hyperfleet/test/fakeoidc"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// newBrowserContext starts headless Chromium with a fresh profile, until the test ends.
func newBrowserContext(t *testing.T) context.Context { return headless.NewContext(t) }

// screenshots keeps the browser's screenshots: in CONSOLE_ARTIFACTS when set, else in the test's
// temporary directory.
type screenshots struct {
	t   *testing.T
	dir string
}

func newScreenshots(t *testing.T) *screenshots {
	dir := os.Getenv("CONSOLE_ARTIFACTS")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &screenshots{t: t, dir: dir}
}

func (s *screenshots) take(ctx context.Context, name string) {
	s.t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		s.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(s.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.t.Logf("screenshot %s", path)
}

// clearField empties a form field, as a person selecting its text and deleting it would.
func clearField(ctx context.Context, id string) error {
	_, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => { const e = document.getElementById("`+id+`"); e.value = ""; return true })()`))
	return err
}

// waitForJob waits until the job page's live log has ended, and returns its final state.
func waitForJob(t *testing.T, ctx context.Context, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		state, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById("job-log") || {getAttribute: () => ""}).getAttribute("data-ended") || ""`))
		if err != nil {
			t.Fatal(err)
		}
		if state != "" {
			return state
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("the job's log did not end within %s", timeout)
	return ""
}

// TestBrowserCreatesWatchesAndDeletesAVM is a person at the console: they sign in through the
// identity provider's login page (with the keyboard), see the inventory, create a VM with the form,
// watch its job log stream until the VM runs on the Proxmox VE simulator, and delete it after
// confirming.
func TestBrowserCreatesWatchesAndDeletesAVM(t *testing.T) {
	g := NewWithT(t)
	ctx := newBrowserContext(t)
	shots := newScreenshots(t)
	sim := pvesim.StartForTest(t, pvesim.Config{})
	startManager(t)
	hypervisorCluster(t, sim, teamA, "pve-lab")
	f := startConsole(t)
	bg := context.Background()

	// Some company for the new VM: a running VM made through the API and a pool.
	tok := f.token(t, alice, fakeoidc.TokenOptions{})
	r := f.call(t, "POST", "/api/v1/vms", tok, console.CreateVMRequest{Namespace: teamA, Name: "build-cache", Cluster: "pve-lab",
		Template: "9000", CPUs: 4, MemoryMiB: 8192})
	g.Expect(r.Status).To(Equal(202), string(r.Body))
	pool := builder.NewRunnerPool("linux-x64", teamA).WithCluster("fleet").WithBounds(1, 10).WithLabels("linux", "x64").Build()
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(bg, pool))).To(Succeed())
	// A VM pool of none yet, so the manager makes no VMs for it.
	g.Expect(client.IgnoreAlreadyExists(env.Client.Create(bg, vmPoolObject(teamA, "web-servers", 0, nil)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := &infrav1.MachineClaim{}
		g.Expect(env.Client.Get(bg, client.ObjectKey{Namespace: teamA, Name: "build-cache"}, c)).To(Succeed())
		g.Expect(c.Status.Phase).To(Equal(infrav1.MachineClaimPhaseReady))
	}, time.Minute, 250*time.Millisecond).Should(Succeed())

	// Sign in: the console sends the browser to the identity provider's login page.
	g.Expect(chromedp.Do(ctx,
		chromedp.Navigate(f.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("username")),
	)).To(Succeed())
	loc, err := chromedp.Run(ctx, chromedp.Location())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(loc).To(HavePrefix(f.issuer.Issuer() + "/authorize"))
	shots.take(ctx, "01-sign-in")
	g.Expect(chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("username"), alice.Username),
		chromedp.SendKeys(chromedp.ID("password"), alice.Password+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`table[data-live="vms"]`)),
	)).To(Succeed())

	// The inventory: clusters, the simulator's hosts (read by the inventory), the running VM.
	g.Eventually(func(g Gomega) {
		g.Expect(chromedp.Do(ctx, chromedp.Navigate(f.URL+"/"), chromedp.WaitVisible(chromedp.ID("vms-h")))).To(Succeed())
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("main")))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(text).To(And(ContainSubstring("pve-lab"), ContainSubstring("pve1"), ContainSubstring("pve3"),
			ContainSubstring("build-cache"), ContainSubstring("Running")))
	}, 30*time.Second, time.Second).Should(Succeed())
	who, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("header .who")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(who).To(ContainSubstring("Alice Operator"))
	shots.take(ctx, "02-inventory")

	// Create a VM with the form; a mistake first, which the form explains next to the field.
	g.Expect(chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`a.nav-cta`)),
		chromedp.WaitVisible(chromedp.ID("name")),
		chromedp.SendKeys(chromedp.ID("name"), "Web_01"),
		chromedp.SendKeys(chromedp.ID("template"), "9000"),
		chromedp.Click(chromedp.CSS(`form.form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`.field-err`)),
	)).To(Succeed())
	shots.take(ctx, "03-create-vm-mistake")
	errText, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`.field-err`)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(errText).To(ContainSubstring("lower-case letters"))
	invalid, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.ID("name"), "aria-invalid"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(invalid.Value).To(Equal("true"))
	for id, value := range map[string]string{"name": "", "cpus": "", "memoryMiB": "", "userData": ""} {
		g.Expect(clearField(ctx, id)).To(Succeed(), value)
	}
	g.Expect(chromedp.Do(ctx,
		chromedp.SetValue(chromedp.ID("cluster"), teamA+"/pve-lab"),
		chromedp.SendKeys(chromedp.ID("name"), "web-01"),
		chromedp.SendKeys(chromedp.ID("cpus"), "2"),
		chromedp.SendKeys(chromedp.ID("memoryMiB"), "2048"),
		chromedp.SendKeys(chromedp.ID("userData"), "#cloud-config\nhostname: web-01\npackages: [nginx]\n"),
	)).To(Succeed())
	shots.take(ctx, "04-create-vm")
	g.Expect(chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`form.form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("job-log")),
	)).To(Succeed())

	// The job page streams the claim's progress until the VM runs.
	g.Expect(waitForJob(t, ctx, 2*time.Minute)).To(Equal("Succeeded"))
	logText, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("job-log")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logText).To(And(ContainSubstring("Cloning"), ContainSubstring("condition Ready=True"), ContainSubstring("power state Running")))
	// The facts above the log follow the VM too.
	g.Eventually(func(g Gomega) {
		power, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#vm-facts [data-field="powerState"]`)))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(power).To(Equal("Running"))
	}, 10*time.Second, 250*time.Millisecond).Should(Succeed())
	shots.take(ctx, "05-job-log")
	claim := &infrav1.MachineClaim{}
	g.Expect(env.Client.Get(bg, client.ObjectKey{Namespace: teamA, Name: "web-01"}, claim)).To(Succeed())
	vm, ok := sim.VM(vmidOf(claim.Status.VMID))
	g.Expect(ok).To(BeTrue())
	g.Expect(vm.Status).To(Equal("running"))

	g.Expect(chromedp.Do(ctx, chromedp.Navigate(f.URL+"/pools"), chromedp.WaitVisible(chromedp.CSS("table")))).To(Succeed())
	poolsText, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("main")))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(poolsText).To(And(ContainSubstring("linux-x64"), ContainSubstring("VM pools"), ContainSubstring("web-servers")))
	shots.take(ctx, "06-pools")

	// Delete it from the inventory, after the confirmation page.
	g.Expect(chromedp.Do(ctx,
		chromedp.Navigate(f.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-vm="`+teamA+`/web-01"] a.danger-link`)),
		chromedp.Click(chromedp.CSS(`tr[data-vm="`+teamA+`/web-01"] a.danger-link`)),
		chromedp.WaitVisible(chromedp.CSS(`button.danger`)),
	)).To(Succeed())
	shots.take(ctx, "07-confirm-delete")
	g.Expect(chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`button.danger`)),
		chromedp.WaitVisible(chromedp.ID("job-log")),
	)).To(Succeed())
	g.Expect(waitForJob(t, ctx, 2*time.Minute)).To(Equal("Succeeded"))
	logText, _ = chromedp.Run(ctx, chromedp.Text(chromedp.ID("job-log")))
	g.Expect(strings.ToLower(logText)).To(ContainSubstring("gone"))
	_, exists := sim.VM(vmidOf(claim.Status.VMID))
	g.Expect(exists).To(BeFalse(), "the VM is gone from the hypervisor")
	shots.take(ctx, "08-deleted")
}
