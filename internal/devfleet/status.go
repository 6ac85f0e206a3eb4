package devfleet

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/hyperfleet-io/hyperfleet/api"
	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/proxmox"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// Summary is the fleet at one instant: the pool, its Machines and claims, the VMs and the jobs.
type Summary struct {
	Pool     fleetv1.RunnerPoolStatus
	Machines []clusterv1.Machine
	Claims   []infrav1.MachineClaim
	// OwnedVMs carry HyperFleet's tag; Foreign are everything else but templates.
	OwnedVMs, ForeignVMs []pvesim.VM
	Jobs                 JobCounts
}

// ClientFor builds an API client from the state's kubeconfig.
func ClientFor(s *State) (client.Client, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: api.NewScheme()})
}

// Summarize reads the fleet's state from the API server, the simulator and the fake CI platform.
func Summarize(ctx context.Context, c client.Client, s *State) (*Summary, error) {
	out := &Summary{}
	pool := &fleetv1.RunnerPool{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Pool}, pool); err != nil {
		return nil, err
	}
	out.Pool = pool.Status
	machines := &clusterv1.MachineList{}
	if err := c.List(ctx, machines, client.InNamespace(s.Namespace)); err != nil {
		return nil, err
	}
	out.Machines = machines.Items
	claims := &infrav1.MachineClaimList{}
	if err := c.List(ctx, claims, client.InNamespace(s.Namespace)); err != nil {
		return nil, err
	}
	out.Claims = claims.Items
	vms, err := ListVMs(ctx, s)
	if err != nil {
		return nil, err
	}
	out.OwnedVMs, out.ForeignVMs = SplitVMs(vms)
	if s.Buildkite != nil {
		jobs, err := ListBuildkiteJobs(ctx, s)
		if err != nil {
			return nil, err
		}
		out.Jobs = CountBuildkiteJobs(jobs)
		return out, nil
	}
	jobs, err := ListJobs(ctx, s)
	if err != nil {
		return nil, err
	}
	out.Jobs = CountJobs(jobs)
	return out, nil
}

// SplitVMs separates the VMs HyperFleet owns (its tag) from the others, leaving templates out.
func SplitVMs(vms []pvesim.VM) (owned, foreign []pvesim.VM) {
	for _, vm := range vms {
		switch {
		case slices.Contains(vm.Tags, proxmox.TagManaged):
			owned = append(owned, vm)
		case !vm.Template:
			foreign = append(foreign, vm)
		}
	}
	return owned, foreign
}

// Line is the one-line form the live feed prints when something changed. Its VMs are the
// claims' on every hypervisor of the fleet, as the claims report them.
func (s *Summary) Line() string {
	vms, running := 0, 0
	for _, c := range s.Claims {
		if c.Status.VMID == "" {
			continue
		}
		vms++
		if c.Status.PowerState == string(hypervisor.PowerStateRunning) {
			running++
		}
	}
	return fmt.Sprintf("pool desired=%d machines=%d ready=%d idle=%d busy=%d | VMs %d (%d running) | jobs queued=%d running=%d done=%d",
		s.Pool.DesiredReplicas, len(s.Machines), s.Pool.ReadyReplicas, s.Pool.IdleReplicas, s.Pool.BusyReplicas,
		vms, running, s.Jobs.Queued, s.Jobs.Running, s.Jobs.Completed)
}

// Print writes the summary as tables.
func (s *Summary) Print(w io.Writer) {
	fmt.Fprintln(w, s.Line())
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nMACHINE\tPHASE\tCLAIM PHASE\tVM ID\tNODE\tPOWER")
	claims := map[string]infrav1.MachineClaim{}
	for _, c := range s.Claims {
		claims[c.Name] = c
	}
	sort.Slice(s.Machines, func(i, k int) bool { return s.Machines[i].Name < s.Machines[k].Name })
	for _, m := range s.Machines {
		c := claims[m.Spec.InfrastructureRef.Name]
		phase := m.Status.Phase
		if !m.DeletionTimestamp.IsZero() {
			phase += " (deleting)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, phase, c.Status.Phase, c.Status.VMID, c.Status.Node, c.Status.PowerState)
		delete(claims, m.Spec.InfrastructureRef.Name)
	}
	for _, c := range claims {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", "(no Machine) "+c.Name, "-", c.Status.Phase, c.Status.VMID, c.Status.Node, c.Status.PowerState)
	}
	fmt.Fprintln(tw, "\nVMID\tNAME\tNODE\tSTATUS\tTAGS")
	for _, vm := range append(append([]pvesim.VM(nil), s.OwnedVMs...), s.ForeignVMs...) {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", vm.VMID, vm.Name, vm.Node, vm.Status, strings.Join(vm.Tags, ";"))
	}
	_ = tw.Flush()
}
