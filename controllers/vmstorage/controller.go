package vmstorage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/finalizers"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/condition"
	"github.com/hyperfleet-io/hyperfleet/pkg/connection"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/vmstorage"
)

// ClaimStorageIndex indexes MachineClaims by the VMStorage their disks were placed on
// ("namespace/name").
const ClaimStorageIndex = "hyperfleet.io/claim-vmstorage"

// Reconciler defines or adopts VMStorages on their HypervisorClusters and reads their capacity.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Registry *connection.Registry
	// Refresh is how often a storage's capacity is read again. Default 1m.
	Refresh time.Duration
}

// +kubebuilder:rbac:groups=hyperfleet.io,resources=vmstorages,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hyperfleet.io,resources=vmstorages/status;vmstorages/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=hyperfleet.io,resources=machinesnapshotschedules,verbs=get;list;watch;create

// Reconcile brings one VMStorage in line with its spec and reads its capacity.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	st := &fleetv1.VMStorage{}
	if err := r.Client.Get(ctx, req.NamespacedName, st); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if st.DeletionTimestamp.IsZero() {
		if added, err := finalizers.EnsureFinalizer(ctx, r.Client, st, fleetv1.VMStorageFinalizer); err != nil || added {
			return ctrl.Result{}, err
		}
	}
	helper, err := patch.NewHelper(st, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := helper.Patch(ctx, st, patch.WithStatusObservedGeneration{},
			patch.WithOwnedConditions{Conditions: []string{fleetv1.ReadyCondition, fleetv1.InUseCondition, fleetv1.ReplicatedCondition}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()
	if err := r.ensureTierLabel(ctx, st); err != nil {
		return ctrl.Result{}, err
	}
	claims, err := r.placedClaims(ctx, st)
	if err != nil {
		return ctrl.Result{}, err
	}
	st.Status.Allocations, st.Status.AllocatedBytes = int32(len(claims)), 0
	for _, c := range claims {
		st.Status.AllocatedBytes += c.Status.Storage.Bytes
	}
	if !st.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, st, claims)
	}
	res := r.reconcileRealizations(ctx, st)
	if err := r.reconcileSnapshots(ctx, st, claims); err != nil {
		return ctrl.Result{}, err
	}
	r.reconcileReplication(ctx, st, claims)
	return res, nil
}

// ensureTierLabel keeps the hyperfleet.io/storage-tier label equal to spec.tier, so people
// select storages by tier with kubectl.
func (r *Reconciler) ensureTierLabel(ctx context.Context, st *fleetv1.VMStorage) error {
	if st.Labels[fleetv1.VMStorageTierLabel] == st.Spec.Tier {
		return nil
	}
	base := st.DeepCopy()
	if st.Spec.Tier == "" {
		delete(st.Labels, fleetv1.VMStorageTierLabel)
	} else {
		if st.Labels == nil {
			st.Labels = map[string]string{}
		}
		st.Labels[fleetv1.VMStorageTierLabel] = st.Spec.Tier
	}
	return r.Client.Patch(ctx, st, client.MergeFrom(base))
}

// reconcileRealizations defines or adopts the storage on each of spec.clusters and reads its
// capacity there.
func (r *Reconciler) reconcileRealizations(ctx context.Context, st *fleetv1.VMStorage) ctrl.Result {
	var out []fleetv1.VMStorageRealization
	retry := false
	for _, ref := range st.Spec.Clusters {
		rz := r.realize(ctx, st, ref.Name)
		if !rz.Ready && rz.Reason == fleetv1.HypervisorUnavailableReason {
			retry = true
		}
		out = append(out, rz)
	}
	for _, old := range st.Status.Realizations {
		if slices.ContainsFunc(st.Spec.Clusters, func(c fleetv1.LocalObjectReference) bool { return c.Name == old.Cluster }) {
			continue
		}
		if err := r.remove(ctx, st, old.Cluster); err != nil {
			old.Ready, old.Reason, old.Message = false, reasonOf(err), fmt.Sprintf("removing the storage from HypervisorCluster %s: %v", old.Cluster, err)
			out = append(out, old)
			retry = true
		}
	}
	st.Status.Realizations = out
	st.Status.UsedBytes, st.Status.AvailableBytes = 0, 0
	rs := make([]condition.Realization, 0, len(out))
	for _, rz := range out {
		rs = append(rs, condition.Realization{Cluster: rz.Cluster, Ready: rz.Ready, Reason: rz.Reason, Message: rz.Message})
		if !rz.Ready {
			continue
		}
		for _, n := range rz.Nodes {
			st.Status.UsedBytes += n.UsedBytes
			st.Status.AvailableBytes += n.AvailableBytes
			if rz.Shared {
				break // one pool seen from every node
			}
		}
	}
	st.Status.Phase = map[condition.Realized]fleetv1.VMStoragePhase{condition.RealizedNowhere: fleetv1.VMStoragePending,
		condition.RealizedPartly: fleetv1.VMStorageDegraded, condition.RealizedEverywhere: fleetv1.VMStorageReady}[condition.Summarize(st, rs)]
	if retry {
		return ctrl.Result{RequeueAfter: 10 * time.Second}
	}
	return ctrl.Result{RequeueAfter: r.refresh()}
}

func (r *Reconciler) realize(ctx context.Context, st *fleetv1.VMStorage, cluster string) fleetv1.VMStorageRealization {
	rz := fleetv1.VMStorageRealization{Cluster: cluster}
	fail := func(reason, msg string) fleetv1.VMStorageRealization {
		rz.Ready, rz.Reason, rz.Message = false, reason, msg
		return rz
	}
	hc, p, err := r.provider(ctx, st.Namespace, cluster)
	if hc != nil {
		rz.Endpoint = hc.Spec.Endpoint
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fail(fleetv1.HypervisorClusterNotFoundReason, fmt.Sprintf("HypervisorCluster %s does not exist in namespace %s", cluster, st.Namespace))
		}
		return fail(fleetv1.HypervisorUnavailableReason, fmt.Sprintf("HypervisorCluster %s: %v", cluster, err))
	}
	sg, _ := hypervisor.As[hypervisor.Storager](p)
	if sg == nil {
		return fail(fleetv1.UnsupportedReason, fmt.Sprintf("HypervisorCluster %s's provider (%s) defines no storages", cluster, connection.ProviderOf(hc)))
	}
	pool := vmstorage.Pool(st, owner(hc))
	if gaps := sg.StorageGaps(pool); len(gaps) > 0 {
		msgs := make([]string, 0, len(gaps))
		for _, g := range gaps {
			msgs = append(msgs, g.Field+": "+g.Reason)
		}
		return fail(fleetv1.UnsupportedReason, fmt.Sprintf("HypervisorCluster %s (%s) cannot give this storage: %s", cluster, connection.ProviderOf(hc), strings.Join(msgs, "; ")))
	}
	if err := sg.EnsureStorage(ctx, pool); err != nil {
		if errors.Is(err, hypervisor.ErrNotFound) && st.Spec.Adopt {
			return fail(fleetv1.StorageNotFoundReason, fmt.Sprintf("HypervisorCluster %s has no storage %s to adopt: %v", cluster, pool.Name, err))
		}
		return fail(reasonOf(err), fmt.Sprintf("defining the storage on HypervisorCluster %s: %v", cluster, err))
	}
	observed := time.Now()
	state, err := sg.StorageState(ctx, pool.Name)
	if err != nil {
		return fail(reasonOf(err), fmt.Sprintf("reading storage %s on HypervisorCluster %s: %v", pool.Name, cluster, err))
	}
	rz.Ready, rz.Shared, rz.ObservedTime = true, state.Shared, &metav1.Time{Time: observed}
	for _, n := range state.Nodes {
		rz.Nodes = append(rz.Nodes, fleetv1.VMStorageNode{Node: n.Node, Active: n.Active, TotalBytes: n.TotalBytes, UsedBytes: n.UsedBytes, AvailableBytes: n.AvailableBytes})
	}
	if !readyBefore(st, cluster) {
		verb := "defined"
		if st.Spec.Adopt {
			verb = "adopted"
		}
		r.Recorder.Eventf(st, corev1.EventTypeNormal, fleetv1.StorageRealizedEventReason, "%s storage %s on HypervisorCluster %s", verb, pool.Name, cluster)
	}
	return rz
}

func readyBefore(st *fleetv1.VMStorage, cluster string) bool {
	for _, old := range st.Status.Realizations {
		if old.Cluster == cluster {
			return old.Ready
		}
	}
	return false
}

// provider is the HypervisorCluster of the storage's namespace and its provider.
func (r *Reconciler) provider(ctx context.Context, ns, name string) (*infrav1.HypervisorCluster, hypervisor.Provider, error) {
	hc := &infrav1.HypervisorCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, hc); err != nil {
		return nil, nil, err
	}
	p, err := r.Registry.Get(ctx, hc)
	return hc, p, err
}

// remove deletes the storage's definition on one HypervisorCluster (an adopted one is only
// forgotten); its data stays.
func (r *Reconciler) remove(ctx context.Context, st *fleetv1.VMStorage, cluster string) error {
	if st.Spec.Adopt {
		return nil
	}
	hc, p, err := r.provider(ctx, st.Namespace, cluster)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	sg, _ := hypervisor.As[hypervisor.Storager](p)
	if sg == nil {
		return nil
	}
	return sg.DeleteStorage(ctx, vmstorage.StorageName(st), owner(hc))
}

// reconcileDelete removes the storage once no VM is placed on it.
func (r *Reconciler) reconcileDelete(ctx context.Context, st *fleetv1.VMStorage, claims []infrav1.MachineClaim) (ctrl.Result, error) {
	st.Status.Phase = fleetv1.VMStorageDeleting
	if len(claims) > 0 {
		names := make([]string, 0, len(claims))
		for _, c := range claims {
			names = append(names, c.Namespace+"/"+c.Name)
		}
		slices.Sort(names)
		if len(names) > 10 {
			names = append(names[:10], fmt.Sprintf("and %d more", len(claims)-10))
		}
		msg := fmt.Sprintf("%d VM(s) have disks on the storage: %s; delete them first", len(claims), strings.Join(names, ", "))
		conditions.Set(st, metav1.Condition{Type: fleetv1.InUseCondition, Status: metav1.ConditionTrue, Reason: fleetv1.VMsAttachedReason, Message: msg})
		conditions.Set(st, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: fleetv1.VMsAttachedReason, Message: "deleting: " + msg})
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	conditions.Set(st, metav1.Condition{Type: fleetv1.InUseCondition, Status: metav1.ConditionFalse, Reason: "NoVMs", Message: "no VM has disks on the storage"})
	var errs []error
	for _, rz := range st.Status.Realizations {
		err := r.remove(ctx, st, rz.Cluster)
		if errors.Is(err, hypervisor.ErrNotOwned) && !rz.Ready {
			// Never defined there: the same-named object that stopped it is someone else's and
			// stays, and nothing of ours is left to remove.
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("HypervisorCluster %s: %w", rz.Cluster, err))
		}
	}
	if len(errs) > 0 {
		err := kerrors.NewAggregate(errs)
		conditions.Set(st, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reasonOf(errs[0]), Message: "deleting: " + err.Error()})
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	controllerutil.RemoveFinalizer(st, fleetv1.VMStorageFinalizer)
	return ctrl.Result{}, nil
}

// placedClaims are the MachineClaims whose disks were placed on the storage.
func (r *Reconciler) placedClaims(ctx context.Context, st *fleetv1.VMStorage) ([]infrav1.MachineClaim, error) {
	var list infrav1.MachineClaimList
	if err := r.Client.List(ctx, &list, client.MatchingFields{ClaimStorageIndex: st.Namespace + "/" + st.Name}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (r *Reconciler) refresh() time.Duration {
	if r.Refresh > 0 {
		return r.Refresh
	}
	return time.Minute
}

func owner(hc *infrav1.HypervisorCluster) hypervisor.Ownership {
	return hypervisor.Ownership{Cluster: hc.Namespace + "/" + hc.Name}
}

// reasonOf classifies a hypervisor error for a realisation's reason; an adopted storage that
// is not there is StorageNotFound.
func reasonOf(err error) string {
	if errors.Is(err, hypervisor.ErrNotFound) {
		return fleetv1.StorageNotFoundReason
	}
	return condition.HypervisorReason(err)
}

// SetupWithManager registers the reconciler and the claim index it reads.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &infrav1.MachineClaim{}, ClaimStorageIndex, claimStorage); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1.VMStorage{}).
		Watches(&infrav1.MachineClaim{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []ctrl.Request {
			keys := claimStorage(o)
			if len(keys) == 0 {
				return nil
			}
			ns, name, _ := strings.Cut(keys[0], "/")
			return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}}
		})).
		Watches(&infrav1.HypervisorCluster{}, handler.EnqueueRequestsFromMapFunc(r.storagesOfCluster)).
		WithOptions(opts).
		Named("vmstorage").
		Complete(r)
}

func (r *Reconciler) storagesOfCluster(ctx context.Context, o client.Object) []ctrl.Request {
	var list fleetv1.VMStorageList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []ctrl.Request
	for _, st := range list.Items {
		if slices.ContainsFunc(st.Spec.Clusters, func(c fleetv1.LocalObjectReference) bool { return c.Name == o.GetName() }) {
			out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&st)})
		}
	}
	return out
}

func claimStorage(o client.Object) []string {
	c, ok := o.(*infrav1.MachineClaim)
	if !ok || c.Status.Storage == nil {
		return nil
	}
	return []string{c.Status.Storage.Namespace + "/" + c.Status.Storage.Name}
}
