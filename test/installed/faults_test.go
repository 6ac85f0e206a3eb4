package installed

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestReleaseSurvivesPodAndNodeFaults deletes the manager's pod (its Deployment replaces it and
// the new pod takes the lease over) and then restarts the node as a reboot would (kubelet and
// containerd stopped, every container killed): every pod of the release is Ready again and one
// manager holds the lease.
func TestReleaseSurvivesPodAndNodeFaults(t *testing.T) {
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

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start = time.Now()
	g.Expect(theNode.Reboot(ctx)).To(Succeed())
	// Every container started again after the restart began, and the lease renewed since: a
	// status or a lease left from before the restart does not count.
	expectAllReady(t, systemNS, start)
	g.Expect(expectLeaseHeld(t, systemNS, start)).To(Equal(after), "the same pod, its containers restarted, holds the lease again")
	t.Logf("node restarted: every pod Ready and the lease held %.1fs later", time.Since(start).Seconds())
}
