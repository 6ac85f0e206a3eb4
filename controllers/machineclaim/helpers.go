package machineclaim

import (
	"context"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/controllers/clusterruntime"

	"k8s.io/apimachinery/pkg/types"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimplacement"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/placement"
)

// reservedMemory sums the memory of this cluster's claims that have a node but no running VM yet,
// so a burst of claims spreads over nodes instead of all choosing the emptiest one; and of those
// whose VM started at or after listedAt, which the node listing placement uses does not show.
func (r *Reconciler) reservedMemory(ctx context.Context, s *claimScope, listedAt time.Time) (map[string]int, error) {
	claims, err := claimplacement.ClusterClaims(ctx, r.Client, s.claim.Namespace, s.hc.Name)
	if err != nil {
		return nil, err
	}
	return r.reservedFor(s, claims, listedAt), nil
}

// reservedFor is reservedMemory over claims already listed.
func (r *Reconciler) reservedFor(s *claimScope, claims []infrav1.MachineClaim, listedAt time.Time) map[string]int {
	reserved := claimplacement.ReservedSince(claims, s.claim.UID, listedAt)
	// Claims placed an instant ago may not be in the cache yet.
	counted := map[string]bool{}
	for _, other := range claims {
		if other.UID == s.claim.UID || other.Status.Node != "" || other.Status.CompletedStep == infrav1.StepStarted {
			counted[clusterruntime.ClaimKey(&other)] = true
		}
	}
	r.cluster(s).AddPromised(clusterruntime.ClaimKey(s.claim), counted, reserved)
	return reserved
}

// startsAmbiguous says how long until a node listing made at listedAt stops being ambiguous about
// the cluster's VMs that started about then (ambiguousUntil); zero when none did.
func (r *Reconciler) startsAmbiguous(ctx context.Context, s *claimScope, listedAt time.Time) (time.Duration, error) {
	claims, err := claimplacement.ClusterClaims(ctx, r.Client, s.claim.Namespace, s.hc.Name)
	if err != nil {
		return 0, err
	}
	if wait := time.Until(ambiguousUntil(claims, s.claim.UID, listedAt)); wait > 0 {
		return wait, nil
	}
	return 0, nil
}

// ambiguousUntil is when a fresh node listing will count the claims' started VMs exactly once.
// reservedSince counts a VM as not yet listed from its VMProvisioned condition, whose time has
// whole seconds and comes after the VM began to use memory, so a listing made from a little before
// that time to a second after it may show the VM and count it again; one made later does not.
// The zero time when no VM is in that position for the listing made at listedAt.
func ambiguousUntil(claims []infrav1.MachineClaim, self types.UID, listedAt time.Time) time.Time {
	var until time.Time
	for i := range claims {
		if t, ok := claimplacement.StartedAt(&claims[i], self); ok && !t.Before(listedAt.Add(-time.Second)) && !listedAt.Before(t.Add(-ambiguousStart)) {
			until = later(until, t.Add(2*time.Second))
		}
	}
	return until
}

// ambiguousStart is how long before its VMProvisioned time a VM may already use memory on its
// node: the guest boots and its agent answers before the claim records the VM running.
const ambiguousStart = 30 * time.Second

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func (r *Reconciler) setProviderID(s *claimScope) {
	if s.claim.Spec.ProviderID == "" {
		s.claim.Spec.ProviderID = providerID(s.hc, s.claim.Status.VMID)
	}
}

func (r *Reconciler) poll() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return 2 * time.Second
}

// providerID is hyperfleet://<hypervisor-cluster-uid>/<vm id> for every provider: the VM ID as
// the provider writes it (a Proxmox VMID in decimal, a Hyper-V VM GUID).
func providerID(hc *infrav1.HypervisorCluster, vmID string) string {
	return infrav1.ProviderIDPrefix + string(hc.UID) + "/" + vmID
}

// vmIDOfProviderID is the VM ID a providerID ends with; empty when it has none.
func vmIDOfProviderID(id string) string {
	return id[strings.LastIndex(id, "/")+1:]
}

// vmName is the VM's name in the hypervisor: the claim's name, which Cluster API keeps unique.
func vmName(c *infrav1.MachineClaim) string { return c.Name }

func templateSelector(c *infrav1.MachineClaim) hypervisor.TemplateSelector {
	t := c.Spec.Template
	return hypervisor.TemplateSelector{ID: t.ID, Name: t.Name, Tags: t.Tags, Node: t.Node}
}

func failureDomain(s *claimScope) string {
	if s.machine != nil && s.machine.Spec.FailureDomain != "" {
		return s.machine.Spec.FailureDomain
	}
	return s.claim.Spec.FailureDomain
}

func vmidRange(hc *infrav1.HypervisorCluster) placement.Range {
	if p := hc.Spec.Proxmox; p != nil && p.VMIDRange != nil {
		return placement.Range{Start: int(p.VMIDRange.Start), End: int(p.VMIDRange.End)}
	}
	return placement.DefaultRange
}

func reasonFor(op string) string {
	switch op {
	case infrav1.TaskClone:
		return infrav1.CloningReason
	case infrav1.TaskConfigure:
		return infrav1.ConfiguringReason
	case infrav1.TaskStart, opPowerOn:
		return infrav1.StartingReason
	case opPowerOff:
		return infrav1.StoppingReason
	}
	return infrav1.DeletingReason
}
