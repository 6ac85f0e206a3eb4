package machineclaim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimplacement"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/placement"
)

const (
	// noHostFitsRecheck is how often a persistent claim no host fits looks again without being
	// woken: memory freed by VMs HyperFleet does not own raises no event.
	noHostFitsRecheck = time.Minute
	// noHostFitsMinInterval bounds how often such a claim is placed again however often it is
	// woken: its own status write wakes it, and a message that changes with every read of free
	// memory would otherwise loop.
	noHostFitsMinInterval = 5 * time.Second
)

// placementGate remembers when each waiting persistent claim last failed to find a host. It is a
// rate limit only: a restarted manager forgets it and tries once more at once.
type placementGate struct {
	mu   sync.Mutex
	last map[types.UID]time.Time
}

func (g *placementGate) wait(uid types.UID, now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t, ok := g.last[uid]; ok {
		return t.Add(noHostFitsMinInterval).Sub(now)
	}
	return 0
}

func (g *placementGate) failed(uid types.UID, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.last == nil {
		g.last = map[types.UID]time.Time{}
	}
	g.last[uid] = now
}

func (g *placementGate) placed(uid types.UID) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.last, uid)
}

// placePersistent chooses the host of a new persistent VM with its placement rules (ChooseHost),
// over the HypervisorCluster's shared node listing (made at listedAt) and the claims in the
// cache: no listing of its own. A linked clone can only go where a copy of its template is. When no host fits, the claim
// says which host was left out and why, and waits: it is woken when its HypervisorCluster or
// another persistent claim of it changes, and looks again every noHostFitsRecheck. An empty node
// means the caller returns the result.
func (r *Reconciler) placePersistent(ctx context.Context, s *claimScope, nodes []hypervisor.Node, listedAt time.Time,
	sources []hypervisor.Template, memory int) (hypervisor.Template, string, ctrl.Result, error) {
	c := s.claim
	policy, err := claimplacement.Policy(c, memory)
	if err != nil {
		s.terminal = true
		setVMCondition(c, metav1.ConditionFalse, infrav1.InvalidPlacementReason, err.Error())
		return hypervisor.Template{}, "", ctrl.Result{}, nil
	}
	claims, err := claimplacement.ClusterClaims(ctx, r.Client, c.Namespace, s.hc.Name)
	if err != nil {
		return hypervisor.Template{}, "", ctrl.Result{}, err
	}
	hosts := claimplacement.Hosts(s.hc, nodes, r.reservedFor(s, claims, listedAt))
	lacking, err := claimplacement.PCIReasons(ctx, r.cluster(s).PCIMappings(), s.provider, c, nodes)
	if err != nil {
		return hypervisor.Template{}, "", ctrl.Result{}, fmt.Errorf("listing PCI resource mappings: %w", err)
	}
	fd := failureDomain(s)
	for i := range hosts {
		h := &hosts[i]
		switch {
		case h.Unavailable != "":
		case lacking[h.Name] != "":
			h.Unavailable = lacking[h.Name]
		case fd != "" && h.Name != fd:
			h.Unavailable = "not the failure domain " + fd
		case c.Spec.CloneMode != infrav1.CloneFull && !slices.ContainsFunc(sources, func(t hypervisor.Template) bool { return t.Ref.Node == h.Name }):
			h.Unavailable = "holds no copy of the template (a linked clone is made beside it; use cloneMode Full)"
		}
	}
	node, err := placement.ChooseHost(hosts, claimplacement.PlacedVMs(claims), c.Name, policy)
	if errors.Is(err, placement.ErrNoHost) {
		r.placements.failed(c.UID, time.Now())
		setVMCondition(c, metav1.ConditionFalse, infrav1.NoHostFitsReason, err.Error())
		return hypervisor.Template{}, "", ctrl.Result{RequeueAfter: noHostFitsRecheck}, nil
	}
	if err != nil {
		return hypervisor.Template{}, "", ctrl.Result{}, err
	}
	r.placements.placed(c.UID)
	return placement.TemplateOn(sources, node), node, ctrl.Result{}, nil
}

func isWaitingForHost(c *infrav1.MachineClaim) bool {
	for _, cond := range c.Status.Conditions {
		if cond.Type == infrav1.MachineClaimVMProvisionedCondition {
			return cond.Reason == infrav1.NoHostFitsReason
		}
	}
	return false
}

// persistentPlacementChanged lets through the changes of a persistent claim that can make room
// for another or take it away: created, deleted, or its host or labels changed.
func persistentPlacementChanged() predicate.Funcs {
	persistent := func(o client.Object) bool {
		c, ok := o.(*infrav1.MachineClaim)
		return ok && c.Spec.IsPersistent()
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return persistent(e.Object) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return persistent(e.Object) },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldC, ok1 := e.ObjectOld.(*infrav1.MachineClaim)
			newC, ok2 := e.ObjectNew.(*infrav1.MachineClaim)
			if !ok1 || !ok2 || !newC.Spec.IsPersistent() {
				return false
			}
			return oldC.Status.Node != newC.Status.Node || !labels.Equals(oldC.Labels, newC.Labels) ||
				oldC.DeletionTimestamp.IsZero() != newC.DeletionTimestamp.IsZero()
		},
	}
}

// claimsWaitingForHost wakes the persistent claims of the same HypervisorCluster that wait
// because no host fits them, when another persistent claim comes, goes, moves or is relabelled.
func (r *Reconciler) claimsWaitingForHost(ctx context.Context, o client.Object) []ctrl.Request {
	hc := o.GetLabels()[infrav1.HypervisorClusterNameLabel]
	if hc == "" {
		return nil
	}
	claims, err := claimplacement.ClusterClaims(ctx, r.Client, o.GetNamespace(), hc)
	if err != nil {
		return nil
	}
	var reqs []ctrl.Request
	for i := range claims {
		c := &claims[i]
		if c.Name != o.GetName() && c.Spec.IsPersistent() && isWaitingForHost(c) {
			reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return reqs
}
