package machineclaimtemplate

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hyperfleet-io/hyperfleet/controllers/condition"
	"github.com/hyperfleet-io/hyperfleet/pkg/tracing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	"sigs.k8s.io/cluster-api/util/predicates"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Reconciler checks that the VMs a MachineClaimTemplate describes can be built:
// its source template exists on the hypervisor and some allowed node can hold its cores and memory.
// It re-checks periodically, so a template removed in Proxmox shows up before claims fail.
type Reconciler struct {
	Client      client.Client
	Recorder    record.EventRecorder
	Registry    *connection.Registry
	WatchFilter string
	// Interval between checks. Default 1m.
	Interval time.Duration
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=machineclaimtemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=machineclaimtemplates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=hyperfleet.io,resources=runnerpools,verbs=get;list;watch

// Reconcile checks one MachineClaimTemplate against every HypervisorCluster it is used with.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	tmpl := &infrav1.MachineClaimTemplate{}
	if err := r.Client.Get(ctx, req.NamespacedName, tmpl); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !tmpl.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	helper, err := patch.NewHelper(tmpl, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		r.setReady(tmpl)
		tmpl.Status.ObservedGeneration = tmpl.Generation
		if err := helper.Patch(ctx, tmpl, patch.WithOwnedConditions{Conditions: []string{infrav1.ReadyCondition,
			infrav1.MachineClaimTemplateResolvedCondition, infrav1.MachineClaimTemplateCapacityCondition}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()

	clusters, err := r.hypervisorClusters(ctx, tmpl)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(clusters) == 0 {
		msg := "not used with any HypervisorCluster yet: label it cluster.x-k8s.io/cluster-name, reference it from a RunnerPool, or set spec.template.spec.hypervisorClusterName"
		setTemplateConditions(tmpl, metav1.ConditionUnknown, "NoHypervisorCluster", msg, metav1.ConditionUnknown, "NoHypervisorCluster", msg)
		return ctrl.Result{RequeueAfter: r.interval()}, nil
	}
	var resolved, capacity []string
	var problems, capacityProblems []string
	mismatch := false
	for _, hc := range clusters {
		if msg := tmpl.Spec.Template.Spec.ProviderMismatch(connection.ProviderOf(hc), hc.Name); msg != "" {
			// Claims from this template would be refused there: say so before any is made.
			problems = append(problems, msg)
			mismatch = true
			continue
		}
		ref, capMsg, err := r.check(ctx, tmpl, hc)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", hc.Name, err))
			continue
		}
		resolved = append(resolved, fmt.Sprintf("%s:%s", hc.Name, ref))
		if capMsg != "" {
			capacityProblems = append(capacityProblems, fmt.Sprintf("%s: %s", hc.Name, capMsg))
		} else {
			capacity = append(capacity, hc.Name)
		}
	}
	tmpl.Status.ResolvedTemplate = strings.Join(resolved, ",")
	if len(problems) > 0 {
		reason := infrav1.TemplateNotFoundReason
		switch {
		case mismatch:
			reason = infrav1.ProviderMismatchReason
		case strings.Contains(strings.Join(problems, " "), hypervisor.ErrAmbiguous.Error()):
			reason = infrav1.TemplateAmbiguousReason
		}
		conditions.Set(tmpl, metav1.Condition{Type: infrav1.MachineClaimTemplateResolvedCondition, Status: metav1.ConditionFalse,
			Reason: reason, Message: strings.Join(problems, "; ")})
	} else {
		conditions.Set(tmpl, metav1.Condition{Type: infrav1.MachineClaimTemplateResolvedCondition, Status: metav1.ConditionTrue,
			Reason: infrav1.TemplateResolvedReason, Message: "source template " + tmpl.Status.ResolvedTemplate})
	}
	if len(capacityProblems) > 0 {
		conditions.Set(tmpl, metav1.Condition{Type: infrav1.MachineClaimTemplateCapacityCondition, Status: metav1.ConditionFalse,
			Reason: infrav1.NoCapacityReason, Message: strings.Join(capacityProblems, "; ")})
	} else if len(capacity) > 0 {
		conditions.Set(tmpl, metav1.Condition{Type: infrav1.MachineClaimTemplateCapacityCondition, Status: metav1.ConditionTrue,
			Reason: infrav1.CapacityAvailableReason, Message: "a node can hold it on " + strings.Join(capacity, ",")})
	}
	return ctrl.Result{RequeueAfter: r.interval()}, nil
}

// check resolves the source template on hc (one copy per node for a name/tags selector) and
// compares the request with the capacity of the nodes that can hold the clone.
func (r *Reconciler) check(ctx context.Context, tmpl *infrav1.MachineClaimTemplate, hc *infrav1.HypervisorCluster) (string, string, error) {
	if !conditions.IsTrue(hc, infrav1.HypervisorClusterAvailableCondition) {
		return "", "", fmt.Errorf("HypervisorCluster is not available")
	}
	provider, err := r.Registry.Get(ctx, hc)
	if err != nil {
		return "", "", err
	}
	spec := tmpl.Spec.Template.Spec
	sel := hypervisor.TemplateSelector{ID: spec.Template.ID, Name: spec.Template.Name, Tags: spec.Template.Tags, Node: spec.Template.Node}
	sources, err := provider.ResolveTemplates(ctx, sel)
	if err != nil {
		if errors.Is(err, hypervisor.ErrNotFound) {
			return "", "", fmt.Errorf("no template matches %s", sel)
		}
		return "", "", err
	}
	refs := make([]string, 0, len(sources))
	holders := map[string]bool{}
	cores, mem := int(spec.Cores), int(spec.MemoryMiB)
	tooSmall := ""
	for _, source := range sources {
		refs = append(refs, source.Ref.String())
		holders[source.Ref.Node] = true
		if spec.DiskSizeGiB > 0 && int(spec.DiskSizeGiB) < source.DiskGiB && tooSmall == "" {
			tooSmall = fmt.Sprintf("diskSizeGiB %d is smaller than the %d GiB disk of template %s, which cannot shrink", spec.DiskSizeGiB, source.DiskGiB, source.Ref)
		}
		if spec.Cores == 0 {
			cores = max(cores, source.Cores)
		}
		if spec.MemoryMiB == 0 {
			mem = max(mem, source.MemoryMiB)
		}
	}
	resolved := strings.Join(refs, "+")
	if tooSmall != "" {
		return resolved, tooSmall, nil
	}
	nodes, err := provider.Nodes(ctx)
	if err != nil {
		return "", "", err
	}
	for _, n := range nodes {
		// A linked clone can only be made on a node holding a copy of its template.
		if spec.CloneMode != infrav1.CloneFull && !holders[n.Name] {
			continue
		}
		if n.Online && n.CPUs >= cores && int(n.MemoryTotal>>20) >= mem {
			return resolved, "", nil
		}
	}
	return resolved, fmt.Sprintf("no allowed online node has %d cores and %d MiB", cores, mem), nil
}

// hypervisorClusters finds the HypervisorClusters the template is used with: through its
// cluster-name label, the RunnerPools referencing it, or the hypervisorClusterName it sets.
func (r *Reconciler) hypervisorClusters(ctx context.Context, tmpl *infrav1.MachineClaimTemplate) ([]*infrav1.HypervisorCluster, error) {
	names := map[string]bool{}
	if n := tmpl.Spec.Template.Spec.HypervisorClusterName; n != "" {
		names[n] = true
	}
	clusterNames := map[string]bool{}
	if n := tmpl.Labels[clusterv1.ClusterNameLabel]; n != "" {
		clusterNames[n] = true
	}
	pools := &fleetv1.RunnerPoolList{}
	if err := r.Client.List(ctx, pools, client.InNamespace(tmpl.Namespace)); err != nil {
		return nil, err
	}
	for _, p := range pools.Items {
		if ref := p.Spec.Template.InfrastructureRef; ref.Kind == "MachineClaimTemplate" && ref.Name == tmpl.Name {
			clusterNames[p.Spec.ClusterName] = true
		}
		for _, t := range p.Spec.Template.Targets {
			if t.InfrastructureRef.Name == tmpl.Name {
				clusterNames[t.ClusterName] = true
			}
		}
	}
	for name := range clusterNames {
		cluster := &clusterv1.Cluster{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: tmpl.Namespace, Name: name}, cluster); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		if ref := cluster.Spec.InfrastructureRef; ref.Kind == "HypervisorCluster" {
			names[ref.Name] = true
		}
	}
	var out []*infrav1.HypervisorCluster
	for name := range names {
		hc := &infrav1.HypervisorCluster{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: tmpl.Namespace, Name: name}, hc); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		out = append(out, hc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (r *Reconciler) setReady(tmpl *infrav1.MachineClaimTemplate) {
	resolved := conditions.Get(tmpl, infrav1.MachineClaimTemplateResolvedCondition)
	capacity := conditions.Get(tmpl, infrav1.MachineClaimTemplateCapacityCondition)
	switch {
	case resolved != nil && resolved.Status != metav1.ConditionTrue:
		condition.Mirror(tmpl, infrav1.MachineClaimTemplateResolvedCondition, infrav1.ReadyCondition)
	case capacity != nil && capacity.Status != metav1.ConditionTrue:
		condition.Mirror(tmpl, infrav1.MachineClaimTemplateCapacityCondition, infrav1.ReadyCondition)
	case resolved != nil:
		conditions.Set(tmpl, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionTrue, Reason: infrav1.ReadyReason,
			Message: resolved.Message})
	}
}

func (r *Reconciler) interval() time.Duration {
	if r.Interval > 0 {
		return r.Interval
	}
	return time.Minute
}

func setTemplateConditions(tmpl *infrav1.MachineClaimTemplate, rs metav1.ConditionStatus, rr, rm string, cs metav1.ConditionStatus, cr, cm string) {
	conditions.Set(tmpl, metav1.Condition{Type: infrav1.MachineClaimTemplateResolvedCondition, Status: rs, Reason: rr, Message: rm})
	conditions.Set(tmpl, metav1.Condition{Type: infrav1.MachineClaimTemplateCapacityCondition, Status: cs, Reason: cr, Message: cm})
}

// SetupWithManager registers the controller; HypervisorCluster changes re-check the namespace's templates.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.MachineClaimTemplate{}).
		WithOptions(opts).
		WithEventFilter(predicates.ResourceHasFilterLabel(mgr.GetScheme(), ctrl.LoggerFrom(ctx), r.WatchFilter)).
		Watches(&infrav1.HypervisorCluster{}, handler.EnqueueRequestsFromMapFunc(r.namespaceTemplates)).
		Watches(&fleetv1.RunnerPool{}, handler.EnqueueRequestsFromMapFunc(r.namespaceTemplates)).
		Complete(tracing.Reconciler("machineclaimtemplate", r))
}

func (r *Reconciler) namespaceTemplates(ctx context.Context, o client.Object) []ctrl.Request {
	list := &infrav1.MachineClaimTemplateList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	reqs := make([]ctrl.Request, 0, len(list.Items))
	for _, t := range list.Items {
		reqs = append(reqs, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&t)})
	}
	return reqs
}
