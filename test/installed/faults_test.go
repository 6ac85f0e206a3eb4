package installed

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestReleaseSurvivesPodFaults deletes the manager's pod: its Deployment replaces it and the new
// pod takes the lease over, every pod of the release Ready again.
func TestReleaseSurvivesPodFaults(t *testing.T) {
	g := NewWithT(t)
	installRelease(t)
	expectAllReady(t, systemNS, time.Time{})
	before := expectLeaseHeld(t, systemNS, time.Time{})

	start := time.Now()
	kubectl(t, nil, "-n", systemNS, "delete", "pod", before, "--wait=false")
	after := expectLeaseHeld(t, systemNS, start)
	g.Expect(after).NotTo(Equal(before), "a new manager pod took the lease over")
	expectAllReady(t, systemNS, time.Time{})
	t.Logf("manager pod deleted: its replacement held the lease %.1fs later", time.Since(start).Seconds())
}

// TestJobsSurviveANodeReboot restarts the node as a reboot would (kubelet and containerd stopped,
// every container killed) while a burst of jobs has VMs being cloned and attesting: every pod of
// the release is Ready again, the same manager pod (its containers restarted) holds the lease,
// and every job runs exactly once and succeeds on a VM that goes afterwards. Deliveries sent while
// the receiver was down are lost, as GitHub does not redeliver: the restarted manager's repair
// finds those jobs through the API.
func TestJobsSurviveANodeReboot(t *testing.T) {
	f := installedFleet(t)
	g := NewWithT(t)
	before := expectLeaseHeld(t, systemNS, time.Time{})
	start := time.Now()
	var rebooted time.Time
	runJobs(t, f, 4, func() {
		waitFirstVM(t, f)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		rebooted = time.Now()
		g.Expect(theNode.Reboot(ctx)).To(Succeed())
		// Every container started again after the restart began, and the lease renewed since: a
		// status or a lease left from before the restart does not count.
		expectAllReady(t, systemNS, rebooted)
		g.Expect(expectLeaseHeld(t, systemNS, rebooted)).To(Equal(before), "the same pod, its containers restarted, holds the lease again")
		t.Logf("node restarted %.1fs into the burst: every pod Ready and the lease held %.1fs later",
			rebooted.Sub(start).Seconds(), time.Since(rebooted).Seconds())
	})
	t.Logf("4 jobs queued to all completed across the reboot in %.1fs", time.Since(start).Seconds())
	expectFloor(t, f)
}
