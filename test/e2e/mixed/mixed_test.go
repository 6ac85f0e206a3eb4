package mixed

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

var fleet *devfleet.Fleet

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e (mixed pool): skipped in -short mode")
		os.Exit(0)
	}
	os.Exit(devfleet.RunTests("e2e-mixed", devfleet.Options{
		Hypervisor:  devfleet.HypervisorAll,
		Pool:        devfleet.PoolOptions{Min: 3, Max: 6, Labels: []string{"linux", "x64"}},
		JobDuration: time.Second,
		NoConsole:   true,
	}, func(f *devfleet.Fleet) int { fleet = f; return m.Run() }))
}

const jobs = 9

// TestJobsRunOnProxmoxHyperVAndVSphereVMs: a pool over the Proxmox, the Hyper-V and the vCenter
// simulator (equal priority and weight) keeps its floor of three runners one on each, every
// Machine in its target's Cluster; N jobs each run exactly once, on VMs of every hypervisor;
// afterwards each simulator holds exactly the VMs of the pool's claims there, none leaked or
// duplicated.
func TestJobsRunOnProxmoxHyperVAndVSphereVMs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := fleet.Client()
	ns := fleet.State.Namespace
	poolLabels := client.MatchingLabels{fleetv1.RunnerPoolNameLabel: fleet.State.Pool}
	clusterOf := map[string]string{devfleet.HypervisorProxmox: devfleet.ClusterName, devfleet.HypervisorHyperV: devfleet.HyperVClusterName,
		devfleet.HypervisorVSphere: devfleet.VSphereClusterName}

	g.Eventually(func(g Gomega) {
		claims := readyClaims(g, c, ns, poolLabels)
		g.Expect(claims).To(HaveKeyWithValue(devfleet.HypervisorProxmox, 1))
		g.Expect(claims).To(HaveKeyWithValue(devfleet.HypervisorHyperV, 1))
		g.Expect(claims).To(HaveKeyWithValue(devfleet.HypervisorVSphere, 1))
	}, 3*time.Minute, 250*time.Millisecond).Should(Succeed(), "the floor: one bootstrapped runner on each hypervisor")

	created, err := devfleet.CreateJobs(ctx, &fleet.State, devfleet.JobRequest{Count: jobs, Labels: []string{"linux", "x64"}, Name: "mixed"})
	g.Expect(err).NotTo(HaveOccurred())
	ids := map[int64]bool{}
	for _, j := range created {
		ids[j.ID] = true
	}
	ranOn := map[string]bool{}
	g.Eventually(func(g Gomega) {
		machines := &clusterv1.MachineList{}
		g.Expect(c.List(ctx, machines, client.InNamespace(ns), poolLabels)).To(Succeed())
		for _, m := range machines.Items {
			tg := m.Labels[fleetv1.RunnerTargetLabel]
			g.Expect(m.Spec.ClusterName).To(Equal(clusterOf[tg]), "Machine %s of target %q", m.Name, tg)
		}
		byRunner := map[string]string{}
		for _, m := range machines.Items {
			byRunner[m.Name] = m.Labels[fleetv1.RunnerTargetLabel]
		}
		done := 0
		for _, j := range fleet.GitHub.Jobs() {
			if !ids[j.ID] {
				continue
			}
			if tg, ok := byRunner[j.RunnerName]; ok && j.RunnerName != "" {
				ranOn[tg] = true
			}
			if j.Status == fakegithub.JobCompleted {
				done++
			}
		}
		g.Expect(done).To(Equal(jobs))
	}, 4*time.Minute, 250*time.Millisecond).Should(Succeed(), "every job completes")
	g.Expect(fleet.GitHub.VerifyEachJobRanOnce()).To(Succeed())
	t.Logf("jobs ran on targets: %v", ranOn)
	g.Expect(ranOn).To(HaveKey(devfleet.HypervisorHyperV), "jobs ran on Hyper-V VMs")
	g.Expect(ranOn).To(HaveKey(devfleet.HypervisorProxmox), "on Proxmox VMs")
	g.Expect(ranOn).To(HaveKey(devfleet.HypervisorVSphere), "and on vSphere VMs")

	// Each simulator holds the VMs of the pool's claims on it, and no other owned VM.
	g.Eventually(func(g Gomega) {
		claims := &infrav1.MachineClaimList{}
		g.Expect(c.List(ctx, claims, client.InNamespace(ns), poolLabels)).To(Succeed())
		want := map[string]map[string]bool{devfleet.HypervisorProxmox: {}, devfleet.HypervisorHyperV: {}, devfleet.HypervisorVSphere: {}}
		for _, cl := range claims.Items {
			g.Expect(cl.DeletionTimestamp.IsZero()).To(BeTrue())
			g.Expect(cl.Status.VMID).NotTo(BeEmpty())
			want[cl.Labels[fleetv1.RunnerTargetLabel]][cl.Status.VMID] = true
		}
		owned, _ := devfleet.SplitVMs(fleet.Simulator.VMs())
		pve := map[string]bool{}
		for _, vm := range owned {
			pve[fmt.Sprint(vm.VMID)] = true
		}
		g.Expect(pve).To(Equal(want[devfleet.HypervisorProxmox]), "Proxmox VMs are the Proxmox claims'")
		hv := map[string]bool{}
		for _, vm := range fleet.HyperV.VMs(devfleet.HyperVHost) {
			hv[vm.ID] = true
		}
		g.Expect(hv).To(Equal(want[devfleet.HypervisorHyperV]), "Hyper-V VMs are the Hyper-V claims'")
		vc := map[string]bool{}
		for _, vm := range fleet.VSphere.VMs() {
			if !vm.Template && vm.ExtraConfig["hyperfleet.installation"] != "" {
				vc[vm.InstanceUUID] = true
			}
		}
		g.Expect(vc).To(Equal(want[devfleet.HypervisorVSphere]), "vSphere VMs are the vSphere claims'")
		g.Expect(len(claims.Items)).To(Equal(3), "back to the floor")
	}, 3*time.Minute, 500*time.Millisecond).Should(Succeed())
}

// readyClaims counts the pool's ready MachineClaims per target.
func readyClaims(g Gomega, c client.Client, ns string, labels client.MatchingLabels) map[string]int {
	claims := &infrav1.MachineClaimList{}
	g.Expect(c.List(context.Background(), claims, client.InNamespace(ns), labels)).To(Succeed())
	out := map[string]int{}
	for _, cl := range claims.Items {
		if cl.Status.Phase == infrav1.MachineClaimPhaseReady && cl.DeletionTimestamp.IsZero() {
			out[cl.Labels[fleetv1.RunnerTargetLabel]]++
		}
	}
	return out
}
