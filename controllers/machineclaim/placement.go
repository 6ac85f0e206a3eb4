package machineclaim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimplacement"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/placement"
)

// placeClone chooses the source template and the node and, for a provider with
// PreallocatedIDs, a free VMID, and records them before anything is created.
func (r *Reconciler) placeClone(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	if wait := r.placements.wait(c.UID, time.Now()); wait > 0 && c.Spec.IsPersistent() && isWaitingForHost(c) {
		return ctrl.Result{RequeueAfter: wait}, nil // looked a moment ago and no host fitted
	}
	fresh := false
	if !c.Spec.IsPersistent() {
		// Behind the claims already waiting for room, unless this one's turn has come.
		res, waited, err := r.awaitCapacityTurn(ctx, s)
		if err != nil || !res.IsZero() {
			return res, err
		}
		fresh = waited
	}
	sources, err := r.sourceCandidates(ctx, s)
	if err != nil {
		return r.fail(ctx, s, fmt.Errorf("resolving template %s: %w", templateSelector(c), err))
	}
	// Every VM, runner or persistent, is placed by the health check's node listing (at most a
	// minute old), with the memory of VMs it does not show yet counted from the claims.
	var (
		nodes    []hypervisor.Node
		listedAt time.Time
	)
	switch {
	case fresh:
		// Woken because room freed, which the shared listing may not show yet: list anew, for the
		// claims after this one too.
		listedAt = time.Now()
		if nodes, err = s.provider.Nodes(ctx); err == nil {
			r.cluster(s).PutNodes(s.provider, nodes, listedAt)
		}
		// Listed this instant: the VMs whose start the claims show already ran when it was made,
		// so the second's margin for a shared listing would count them twice and keep this
		// claim, woken for exactly that room, waiting.
		listedAt = listedAt.Add(time.Second)
	default:
		nodes, listedAt, err = r.cluster(s).Nodes(ctx, s.provider)
	}
	if err != nil {
		return r.fail(ctx, s, err)
	}
	memory := int(c.Spec.MemoryMiB)
	if memory == 0 {
		for _, t := range sources {
			memory = max(memory, t.MemoryMiB)
		}
	}
	// Only nodes where a storage the claim asks for has room for its disks.
	disks := diskBytes(c, sources)
	nodes, noStorage := storageNodes(s, nodes, disks)
	if noStorage != "" {
		return r.retryLater(s, infrav1.WaitingForStorageReason, noStorage)
	}
	if c.Spec.IsPersistent() {
		// Persistent VMs have placement rules, and a claim no host fits says why of each host.
		tmpl, node, res, err := r.placePersistent(ctx, s, nodes, listedAt, sources, memory)
		if node == "" {
			return res, err
		}
		r.placed(s, node, memory)
		r.placeStorage(s, node, disks)
		return r.reserveOn(ctx, s, tmpl, node)
	}
	noRoom := func(msg string) (ctrl.Result, error) {
		if time.Since(listedAt) > time.Second {
			// The shared listing may predate room freed since: look again before waiting in line.
			r.cluster(s).PutNodes(s.provider, nil, time.Time{})
			return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, nil
		}
		if wait, err := r.startsAmbiguous(ctx, s, listedAt); err != nil || wait > 0 {
			// A VM that started about when the listing was made may be counted twice (in the
			// listing's used memory and as started since): look again once a listing cannot
			// show it without the count knowing, before waiting in line for a wake-up.
			r.cluster(s).PutNodes(s.provider, nil, time.Time{})
			return ctrl.Result{RequeueAfter: wait}, err
		}
		return r.noCapacity(ctx, s, msg)
	}
	// Hosts in maintenance take no new VMs (a copy: the listing is shared).
	nodes = slices.DeleteFunc(slices.Clone(nodes), func(n hypervisor.Node) bool { return slices.Contains(s.hc.Spec.HostsInMaintenance(), n.Name) })
	// A VM with passed-through devices starts only where each of its mappings has a device.
	lacking, err := claimplacement.PCIReasons(ctx, r.cluster(s).PCIMappings(), s.provider, c, nodes)
	if err != nil {
		return r.fail(ctx, s, fmt.Errorf("listing PCI resource mappings: %w", err))
	}
	if len(lacking) > 0 {
		nodes = slices.DeleteFunc(slices.Clone(nodes), func(n hypervisor.Node) bool { return lacking[n.Name] != "" })
		if len(nodes) == 0 {
			return r.retryLater(s, infrav1.NoHostFitsReason, "no node can take the VM's PCI devices: "+claimplacement.DescribeReasons(lacking))
		}
	}
	reserved, err := r.reservedMemory(ctx, s, listedAt)
	if err != nil {
		return ctrl.Result{}, err
	}
	// allowedNodes are applied here, once: providers list every node.
	req := placement.Request{MemoryMiB: memory, FailureDomain: failureDomain(s), Allowed: s.hc.Spec.AllowedNodes, Reserved: reserved}
	var (
		tmpl hypervisor.Template
		node string
	)
	if c.Spec.CloneMode == infrav1.CloneFull {
		// A full clone copies the disks and may go anywhere.
		if node, err = placement.ChooseNode(nodes, req); err != nil {
			return noRoom(err.Error())
		}
		tmpl = placement.TemplateOn(sources, node)
	} else {
		// A linked clone shares the template's disks, which Proxmox can only do on the template's
		// node unless the storage is shared: the node is chosen among those holding a copy.
		tmpl, err = placement.ChooseTemplate(nodes, sources, req)
		if errors.Is(err, placement.ErrNoTemplate) {
			return r.retryLater(s, infrav1.NoCapacityReason, err.Error()+"; keep a copy of the template there or use cloneMode Full")
		}
		if err != nil {
			return noRoom(err.Error())
		}
		node = tmpl.Ref.Node
	}
	r.placed(s, node, memory)
	r.placeStorage(s, node, disks)
	return r.reserveOn(ctx, s, tmpl, node)
}

// reserveOn records the chosen node and template and, for a provider with PreallocatedIDs, a free
// VMID.
func (r *Reconciler) reserveOn(ctx context.Context, s *claimScope, tmpl hypervisor.Template, node string) (ctrl.Result, error) {
	c := s.claim
	if !s.provider.Capabilities().PreallocatedIDs {
		// The provider names the VM when it creates it: only the node and template are recorded.
		c.Status.Node = node
		c.Status.SourceTemplate = templateRef(tmpl)
		setVMCondition(c, metav1.ConditionFalse, infrav1.CloningReason, fmt.Sprintf("chose %s to clone template %s", node, tmpl.Ref))
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	rng := vmidRange(s.hc)
	id, err := s.provider.NextID(ctx, placement.Candidate(rng, string(c.UID), int(c.Status.FailureCount)))
	if err == nil && id > rng.End {
		id, err = s.provider.NextID(ctx, rng.Start)
	}
	if err != nil {
		return r.fail(ctx, s, fmt.Errorf("allocating a VMID: %w", err))
	}
	if id > rng.End {
		return r.noCapacity(ctx, s, fmt.Sprintf("no free VMID in %d-%d", rng.Start, rng.End))
	}
	c.Status.VMID, c.Status.Node = strconv.Itoa(id), node
	c.Status.SourceTemplate = templateRef(tmpl)
	setVMCondition(c, metav1.ConditionFalse, infrav1.CloningReason, fmt.Sprintf("reserved VMID %d on %s to clone template %s", id, node, tmpl.Ref))
	// Requeue so the reservation is persisted before the clone starts.
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

// sourceCandidates are the templates the claim may be cloned from: the one recorded in status once
// chosen (a VMID given back after a collision keeps it), otherwise every template the selector
// matches, one per node.
func (r *Reconciler) sourceCandidates(ctx context.Context, s *claimScope) ([]hypervisor.Template, error) {
	if s.claim.Status.SourceTemplate != nil {
		tmpl, err := r.sourceTemplate(ctx, s)
		if err != nil {
			return nil, err
		}
		return []hypervisor.Template{tmpl}, nil
	}
	return r.cluster(s).ResolveTemplates(ctx, s.provider, templateSelector(s.claim))
}

// sourceTemplate resolves the template the claim clones: exactly the one recorded in status, so a
// restart or a later step never switches to another node's copy. A claim whose VMID was reserved
// before the template was recorded takes the copy on its node.
func (r *Reconciler) sourceTemplate(ctx context.Context, s *claimScope) (hypervisor.Template, error) {
	c := s.claim
	if ref := c.Status.SourceTemplate; ref != nil {
		return r.cluster(s).ResolveTemplate(ctx, s.provider, hypervisor.TemplateSelector{ID: ref.ID, Node: ref.Node}, templateSelector(c))
	}
	sources, err := r.cluster(s).ResolveTemplates(ctx, s.provider, templateSelector(c))
	if err != nil {
		return hypervisor.Template{}, err
	}
	return placement.TemplateOn(sources, c.Status.Node), nil
}

func templateRef(t hypervisor.Template) *infrav1.TemplateRef {
	return &infrav1.TemplateRef{Node: t.Ref.Node, ID: t.Ref.ID}
}
