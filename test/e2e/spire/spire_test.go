package spire

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

var fleet *devfleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e (SPIRE): skipped in -short mode")
		os.Exit(0)
	}
	os.Exit(devfleet.RunTests("e2e-spire", devfleet.Options{
		Identity:    devfleet.IdentitySPIRE,
		Pool:        devfleet.PoolOptions{Min: 1, Max: 3, Labels: []string{"linux", "x64"}},
		JobDuration: time.Second,
	}, func(f *devfleet.Fleet) int { fleet = f; return m.Run() }))
}

const jobs = 6

// TestJobsOnSPIREAttestedVMs queues jobs on a pool whose VMs attest with SPIRE: each job runs once,
// every runner's BootstrapConfig records a SPIRE attestation, and when the pool is back at its floor
// the SPIRE server holds entries and agents only for the Machines that still exist.
func TestJobsOnSPIREAttestedVMs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fleet.Client()
	ns := fleet.State.Namespace
	poolLabels := client.MatchingLabels{fleetv1.RunnerPoolNameLabel: fleet.State.Pool}
	attested := map[string]bool{}
	recordAttested := func(g Gomega) {
		configs := &bootstrapv1.BootstrapConfigList{}
		g.Expect(c.List(ctx, configs, client.InNamespace(ns))).To(Succeed())
		for _, bc := range configs.Items {
			g.Expect(bc.Spec.Attestation.Provider).To(Equal(bootstrapv1.IdentitySPIRE))
			if conditions.IsTrue(&bc, bootstrapv1.AttestedCondition) {
				attested[bc.Name] = true
			}
		}
	}

	g.Eventually(func(g Gomega) {
		recordAttested(g)
		g.Expect(attested).NotTo(BeEmpty())
	}, 2*time.Minute, 250*time.Millisecond).Should(Succeed(), "the floor runner attests with SPIRE")

	created, err := devfleet.CreateJobs(ctx, &fleet.State, devfleet.JobRequest{Count: jobs, Labels: []string{"linux", "x64"}, Name: "spire"})
	g.Expect(err).NotTo(HaveOccurred())
	ids := map[int64]bool{}
	for _, j := range created {
		ids[j.ID] = true
	}
	g.Eventually(func(g Gomega) {
		recordAttested(g)
		done := 0
		for _, j := range fleet.GitHub.Jobs() {
			if ids[j.ID] && j.Status == fakegithub.JobCompleted {
				done++
			}
		}
		g.Expect(done).To(Equal(jobs))
	}, 4*time.Minute, 250*time.Millisecond).Should(Succeed(), "every job runs")
	g.Expect(fleet.GitHub.VerifyEachJobRanOnce()).To(Succeed())
	for _, j := range fleet.GitHub.Jobs() {
		if ids[j.ID] {
			g.Expect(attested).To(HaveKey(j.RunnerName), "job %d ran on %s, which SPIRE attested", j.ID, j.RunnerName)
		}
	}

	// Back at the floor, SPIRE knows exactly the Machines that exist.
	g.Eventually(func(g Gomega) {
		machines := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(ns), poolLabels)).To(Succeed())
		g.Expect(machines.Items).To(HaveLen(1))
		entries, err := fleet.SPIREServer.AllEntries(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		var machineIDs []string
		for _, e := range entries {
			if strings.HasPrefix(e.SpiffeId.GetPath(), "/hyperfleet/machine/") {
				machineIDs = append(machineIDs, e.SpiffeId.GetPath())
			}
		}
		g.Expect(machineIDs).To(ConsistOf("/hyperfleet/machine/" + ns + "/" + machines.Items[0].Name))
		agents, err := fleet.SPIREServer.AgentIDs(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(len(agents)).To(BeNumerically("<=", 2), "the node agent and the floor runner's at most: %v", agents)
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
	t.Logf("%d runners attested with SPIRE for %d jobs", len(attested), jobs)
}
