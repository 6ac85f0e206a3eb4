package machineclaim

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// TestTaskReadsArePacedByTheKindOfTask: the first read of a task comes when a task of its kind
// typically ends, later reads back off from the poll interval, doubling up to 15 intervals, and a
// claim woken in between does not read early. A wait this process did not see begin (a restart)
// counts from the task's recorded start.
func TestTaskReadsArePacedByTheKindOfTask(t *testing.T) {
	g := NewWithT(t)
	const interval = 2 * time.Second
	linked := &infrav1.MachineClaim{}
	full := &infrav1.MachineClaim{Spec: infrav1.MachineClaimSpec{CloneMode: infrav1.CloneFull, DiskSizeGiB: 10}}
	for _, tc := range []struct {
		op    string
		claim *infrav1.MachineClaim
		want  time.Duration
	}{
		{infrav1.TaskClone, linked, 4 * time.Second},
		{infrav1.TaskClone, full, 4*time.Second + 60*time.Second},
		{infrav1.TaskClone, &infrav1.MachineClaim{Spec: infrav1.MachineClaimSpec{CloneMode: infrav1.CloneFull, DiskSizeGiB: 500}}, 2 * time.Minute},
		{infrav1.TaskDelete, linked, 4 * time.Second},
		{infrav1.TaskStart, linked, 2 * time.Second},
		{infrav1.TaskStop, linked, 2 * time.Second},
		{infrav1.TaskConfigure, linked, 2 * time.Second},
	} {
		g.Expect(expectedTaskTime(tc.op, tc.claim, interval)).To(Equal(tc.want), "%s %+v", tc.op, tc.claim.Spec)
	}
	g.Expect([]time.Duration{backoffDelay(interval, 1), backoffDelay(interval, 2), backoffDelay(interval, 3),
		backoffDelay(interval, 4), backoffDelay(interval, 5), backoffDelay(interval, 9)}).To(Equal([]time.Duration{
		2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}))

	var p pollPacer
	uid := types.UID("claim")
	start := time.Now()
	p.started(uid, "UPID:a", start)
	g.Expect(p.until(uid, "UPID:a", time.Time{}, time.Second, interval)).To(BeNumerically("~", time.Second, 50*time.Millisecond),
		"woken at once, the claim waits for the task's typical end")
	p.read(uid, "UPID:a")
	g.Expect(p.until(uid, "UPID:a", time.Time{}, time.Second, interval)).To(BeNumerically("~", interval, 50*time.Millisecond))
	p.read(uid, "UPID:a")
	g.Expect(p.until(uid, "UPID:a", time.Time{}, time.Second, interval)).To(BeNumerically("~", 2*interval, 50*time.Millisecond))
	g.Expect(p.reads(uid, "UPID:a")).To(Equal(2))

	restarted := time.Now().Add(-10 * time.Second)
	g.Expect(p.until(uid, "UPID:b", restarted, time.Second, interval)).To(BeNumerically("<", 0),
		"a task another process started is read at once when its typical end has passed")
	p.done(uid)
	g.Expect(p.reads(uid, "UPID:a")).To(BeZero())
}
