package machinesnapshotschedule_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/controllertest"
)

func TestMain(m *testing.M) { controllertest.Main(m, "an API server and the manager") }

// poke wakes the schedule's controller after the fake clock moved, as the passing of real time
// would.
func poke(t *testing.T, sched *fleetv1.MachineSnapshotSchedule, n int) {
	t.Helper()
	g := NewWithT(t)
	got := controllertest.Get(g, sched)
	p := client.MergeFrom(got.DeepCopy())
	if got.Annotations == nil {
		got.Annotations = map[string]string{}
	}
	got.Annotations["test.hyperfleet.io/poke"] = fmt.Sprint(n)
	g.Expect(controllertest.Env.Client.Patch(context.Background(), got, p)).To(Succeed())
}

func scheduleSnapshots(g Gomega, sched *fleetv1.MachineSnapshotSchedule) []fleetv1.MachineSnapshot {
	list := &fleetv1.MachineSnapshotList{}
	g.Expect(controllertest.Env.Client.List(context.Background(), list, client.InNamespace(sched.Namespace),
		client.MatchingLabels{fleetv1.MachineSnapshotScheduleLabel: sched.Name})).To(Succeed())
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// TestSnapshotScheduleRetention runs a nightly schedule in Europe/Berlin for five nights on a fake
// clock, keeping three: each night one MachineSnapshot is taken on the hypervisor, and the oldest
// beyond three is deleted with its hypervisor snapshot. Paused, it takes no more.
func TestSnapshotScheduleRetention(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	berlin, err := time.LoadLocation("Europe/Berlin")
	g.Expect(err).NotTo(HaveOccurred())
	// The fake clock starts at the real time: the schedule counts from its creation time, which
	// the API server sets, so a clock set ahead of it would find a night already due (between
	// midnight and 02:00 in Berlin the first night is today's).
	now := time.Now().In(berlin)
	first := time.Date(now.Year(), now.Month(), now.Day(), 2, 0, 0, 0, berlin)
	if first.Sub(now) < time.Minute { // passed, or could pass before the schedule is created
		first = time.Date(now.Year(), now.Month(), now.Day()+1, 2, 0, 0, 0, berlin)
	}
	night := func(i int) time.Time {
		return time.Date(first.Year(), first.Month(), first.Day()+i, 2, 0, 0, 0, berlin)
	}
	clk := clocktesting.NewFakeClock(now)
	claim, sim := controllertest.PersistentVMWith(t, controllertest.Timing{Sweep: 300 * time.Millisecond, OrphanGrace: time.Second, Clock: clk}, infrav1.RunStrategyAlways)
	vmid := controllertest.VMIDOf(claim.Status.VMID)

	sched := &fleetv1.MachineSnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: claim.Namespace},
		Spec: fleetv1.MachineSnapshotScheduleSpec{
			Source:   fleetv1.MachineSnapshotSource{MachineClaimName: claim.Name},
			Schedule: "0 2 * * *", TimeZone: "Europe/Berlin",
			Retention: &fleetv1.SnapshotRetention{Count: ptr.To[int32](3)},
		},
	}
	g.Expect(controllertest.Env.Client.Create(ctx, sched)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, sched)
		g.Expect(got.Status.NextRunTime).NotTo(BeNil())
		g.Expect(got.Status.NextRunTime.Time.Equal(night(0))).To(BeTrue(), "next %v", got.Status.NextRunTime)
		g.Expect(conditions.GetReason(got, fleetv1.ReadyCondition)).To(Equal(fleetv1.ScheduleActiveReason))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Expect(scheduleSnapshots(g, sched)).To(BeEmpty(), "nothing is due before 02:00")

	for i := 0; i < 5; i++ {
		clk.SetTime(night(i).Add(30 * time.Second))
		poke(t, sched, i)
		want := fmt.Sprintf("nightly-%s", night(i).UTC().Format("20060102-1504"))
		g.Eventually(func(g Gomega) {
			snap := &fleetv1.MachineSnapshot{ObjectMeta: metav1.ObjectMeta{Namespace: sched.Namespace, Name: want}}
			g.Expect(controllertest.Get(g, snap).Status.Phase).To(Equal(fleetv1.MachineSnapshotPhaseSucceeded))
		}, 30*time.Second, 100*time.Millisecond).Should(Succeed(), "night %d", i)
	}

	var kept []string
	for i := 2; i < 5; i++ {
		kept = append(kept, fmt.Sprintf("nightly-%s", night(i).UTC().Format("20060102-1504")))
	}
	g.Eventually(func(g Gomega) {
		var names, onVM []string
		for _, s := range scheduleSnapshots(g, sched) {
			names = append(names, s.Name)
			onVM = append(onVM, s.Status.SnapshotName)
		}
		g.Expect(names).To(Equal(kept))
		vm, _ := sim.VM(vmid)
		g.Expect(vm.Snapshots).To(ConsistOf(onVM), "the pruned snapshots are gone from the hypervisor too")
		got := controllertest.Get(g, sched)
		g.Expect(got.Status.Snapshots).To(Equal(int32(3)))
		g.Expect(got.Status.LastRunTime.Time.Equal(night(4))).To(BeTrue())
		g.Expect(got.Status.LastSnapshotName).To(Equal(kept[2]))
		g.Expect(got.Status.NextRunTime.Time.Equal(night(5))).To(BeTrue())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())

	got := controllertest.Get(g, sched)
	p := client.MergeFrom(got.DeepCopy())
	got.Spec.Paused = true
	g.Expect(controllertest.Env.Client.Patch(ctx, got, p)).To(Succeed())
	clk.SetTime(night(6).Add(time.Minute))
	poke(t, sched, 6)
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, sched)
		g.Expect(conditions.GetReason(got, fleetv1.ReadyCondition)).To(Equal(fleetv1.SchedulePausedReason))
		g.Expect(got.Status.NextRunTime).To(BeNil())
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
	g.Consistently(func(g Gomega) { g.Expect(scheduleSnapshots(g, sched)).To(HaveLen(3)) }, 2*time.Second, 200*time.Millisecond).
		Should(Succeed(), "a paused schedule takes no snapshot")

	// A cron expression that does not parse is reported, not guessed at.
	bad := &fleetv1.MachineSnapshotSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: claim.Namespace},
		Spec: fleetv1.MachineSnapshotScheduleSpec{Source: fleetv1.MachineSnapshotSource{MachineClaimName: claim.Name},
			Schedule: "61 2 * * *"},
	}
	g.Expect(controllertest.Env.Client.Create(ctx, bad)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := controllertest.Get(g, bad)
		g.Expect(conditions.GetReason(got, fleetv1.ReadyCondition)).To(Equal(fleetv1.ScheduleInvalidReason))
		g.Expect(conditions.GetMessage(got, fleetv1.ReadyCondition)).To(ContainSubstring("above maximum (59)"))
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}
