package gitlab

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
	"github.com/hyperfleet-io/hyperfleet/test/fakegitlab"
)

var fleet *devfleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e (GitLab): skipped in -short mode")
		os.Exit(0)
	}
	os.Exit(devfleet.RunTests("e2e-gitlab", devfleet.Options{
		Platform:    devfleet.PlatformGitLab,
		Pool:        devfleet.PoolOptions{Min: 1, Max: 3, Labels: []string{"linux", "x64"}},
		JobDuration: time.Second,
		NoConsole:   true,
	}, func(f *devfleet.Fleet) int { fleet = f; return m.Run() }))
}

const jobs = 6

// TestGitLabJobsEachRunOnceOnTheirOwnVM queues jobs in the fake GitLab's project: their Job Hooks
// (which carry no tags) reach the group pool, each job is taken by exactly one runner created for
// its VM, and afterwards the pool is back at its floor with one runner left in GitLab; a job with
// a tag the pool lacks is never taken.
func TestGitLabJobsEachRunOnceOnTheirOwnVM(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fleet.Client()
	ns, pool := fleet.State.Namespace, fleet.State.Pool
	poolLabels := client.MatchingLabels{fleetv1.RunnerPoolNameLabel: pool}

	g.Eventually(func(g Gomega) {
		g.Expect(fleet.GitLab.Runners()).To(HaveLen(1))
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed(), "the floor's VM has its own runner")
	floor := fleet.GitLab.Runners()[0]
	g.Expect(floor.Type).To(Equal(fakegitlab.GroupType))
	g.Expect(floor.Tags).To(ContainElements("linux", "x64"))

	other := fleet.GitLab.CreateJob(fleet.State.GitLab.Project, fakegitlab.JobSpec{Tags: []string{"windows"}})
	created, err := devfleet.CreateJobs(ctx, &fleet.State, devfleet.JobRequest{Count: jobs, Labels: []string{"linux", "x64"}, Name: "gitlab"})
	g.Expect(err).NotTo(HaveOccurred())
	ids := map[int64]bool{}
	for _, j := range created {
		ids[j.ID] = true
	}
	vms := map[string]bool{}
	g.Eventually(func(g Gomega) {
		all, err := devfleet.ListJobs(ctx, &fleet.State)
		g.Expect(err).NotTo(HaveOccurred())
		done := 0
		for _, j := range all {
			if ids[j.ID] && j.Conclusion != nil && *j.Conclusion == string(fakegitlab.JobSuccess) {
				done++
				g.Expect(j.Acquisitions).To(Equal(1), "job %d ran once", j.ID)
				g.Expect(j.RunnerName).NotTo(BeNil())
				vms[*j.RunnerName] = true
			}
		}
		g.Expect(done).To(Equal(jobs))
	}, 4*time.Minute, 500*time.Millisecond).Should(Succeed(), "every job completes")
	g.Expect(vms).To(HaveLen(jobs), "each job ran on a runner of its own VM")
	for name := range vms {
		g.Expect(name).To(HavePrefix(pool+"-"), "a runner is named after its pool's Machine")
	}
	o, _ := fleet.GitLab.GetJob(other.ID)
	g.Expect(o.Status).To(Equal(fakegitlab.JobPending), "no runner of the pool has the windows tag")

	g.Eventually(func(g Gomega) {
		machines := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(ns), poolLabels)).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(1), "only the floor's Machine is left")
		owned, _ := devfleet.SplitVMs(fleet.Simulator.VMs())
		g.Expect(owned).To(HaveLen(1), "only the floor's VM is left")
		g.Expect(fleet.GitLab.Runners()).To(HaveLen(1), "the runners of the VMs that went are deleted")
		p := &fleetv1.RunnerPool{}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: pool}, p)).To(Succeed())
		g.Expect(p.Status.DesiredReplicas).To(BeEquivalentTo(1))
		g.Expect(conditions.IsTrue(p, fleetv1.PlatformAvailableCondition)).To(BeTrue())
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed(), "the pool returns to its floor")
}
