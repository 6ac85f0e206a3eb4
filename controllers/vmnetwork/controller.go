package vmnetwork

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
	"k8s.io/utils/ptr"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
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
	"github.com/hyperfleet-io/hyperfleet/pkg/vmnetwork"
)

// ClaimNetworkIndex indexes MachineClaims by the networks their NICs name ("namespace/name").
const ClaimNetworkIndex = "hyperfleet.io/claim-vmnetwork"

// maxListedVMs bounds status.connectedVMs.
const maxListedVMs = 100

// Reconciler defines VMNetworks on their HypervisorClusters.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Registry *connection.Registry
	// Resync is how often a ready network is checked against the hypervisor again. Default 10m.
	Resync time.Duration
}

// +kubebuilder:rbac:groups=hyperfleet.io,resources=vmnetworks,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=hyperfleet.io,resources=vmnetworks/status;vmnetworks/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=hypervisorclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=machineclaims,verbs=get;list;watch

// Reconcile brings one VMNetwork's hypervisor objects in line with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	n := &fleetv1.VMNetwork{}
	if err := r.Client.Get(ctx, req.NamespacedName, n); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if n.DeletionTimestamp.IsZero() {
		if added, err := finalizers.EnsureFinalizer(ctx, r.Client, n, fleetv1.VMNetworkFinalizer); err != nil || added {
			return ctrl.Result{}, err
		}
	}
	helper, err := patch.NewHelper(n, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	defer func() {
		if err := helper.Patch(ctx, n, patch.WithStatusObservedGeneration{},
			patch.WithOwnedConditions{Conditions: []string{fleetv1.ReadyCondition, fleetv1.InUseCondition}}); err != nil {
			reterr = kerrors.NewAggregate([]error{reterr, err})
		}
	}()
	if n.Status.NetworkID == "" {
		n.Status.NetworkID = vmnetwork.ID(n.UID)
	}
	attached, err := r.attachedClaims(ctx, n)
	if err != nil {
		return ctrl.Result{}, err
	}
	n.Status.ConnectedVMCount = int32(len(attached))
	n.Status.ConnectedVMs = attached[:min(len(attached), maxListedVMs)]
	if err := r.countAddresses(ctx, n); err != nil {
		return ctrl.Result{}, err
	}
	if !n.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, n, attached)
	}
	return r.reconcileNormal(ctx, n)
}

// reconcileNormal defines the network on each of spec.clusters and removes it from the clusters
// the spec no longer names.
func (r *Reconciler) reconcileNormal(ctx context.Context, n *fleetv1.VMNetwork) (ctrl.Result, error) {
	var realizations []fleetv1.VMNetworkRealization
	retry := false
	for _, ref := range n.Spec.Clusters {
		rz := r.realize(ctx, n, ref.Name)
		if !rz.Ready && rz.Reason == fleetv1.HypervisorUnavailableReason {
			retry = true
		}
		realizations = append(realizations, rz)
	}
	for _, old := range n.Status.Realizations {
		if slices.ContainsFunc(n.Spec.Clusters, func(c fleetv1.LocalObjectReference) bool { return c.Name == old.Cluster }) {
			continue
		}
		// A cluster the spec no longer names: its objects go once no VM there uses them.
		if err := r.remove(ctx, n, old.Cluster); err != nil {
			old.Ready, old.Reason, old.Message = false, reasonOf(err), fmt.Sprintf("removing the network from HypervisorCluster %s: %v", old.Cluster, err)
			realizations = append(realizations, old)
			retry = true
		}
	}
	n.Status.Realizations = realizations
	setSummary(n)
	if retry {
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	return ctrl.Result{RequeueAfter: r.resync()}, nil
}

// realize defines the network on one HypervisorCluster and says what became of it.
func (r *Reconciler) realize(ctx context.Context, n *fleetv1.VMNetwork, cluster string) fleetv1.VMNetworkRealization {
	rz := fleetv1.VMNetworkRealization{Cluster: cluster}
	fail := func(reason, msg string) fleetv1.VMNetworkRealization {
		rz.Ready, rz.Reason, rz.Message = false, reason, msg
		return rz
	}
	hc := &infrav1.HypervisorCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: cluster}, hc); err != nil {
		if apierrors.IsNotFound(err) {
			return fail(fleetv1.HypervisorClusterNotFoundReason, fmt.Sprintf("HypervisorCluster %s does not exist in namespace %s", cluster, n.Namespace))
		}
		return fail(fleetv1.HypervisorUnavailableReason, err.Error())
	}
	rz.Endpoint = hc.Spec.Endpoint
	p, err := r.Registry.Get(ctx, hc)
	if err != nil {
		return fail(fleetv1.HypervisorUnavailableReason, fmt.Sprintf("HypervisorCluster %s: %v", cluster, err))
	}
	v, err := vmnetwork.Virtual(n, n.Status.NetworkID, owner(hc))
	if err != nil {
		return fail(fleetv1.InvalidSubnetReason, err.Error())
	}
	nw, _ := hypervisor.As[hypervisor.Networker](p)
	if nw == nil {
		return fail(fleetv1.UnsupportedReason, fmt.Sprintf("HypervisorCluster %s's provider (%s) defines no networks", cluster, connection.ProviderOf(hc)))
	}
	if gaps := nw.NetworkGaps(v); len(gaps) > 0 {
		msgs := make([]string, 0, len(gaps))
		for _, g := range gaps {
			msgs = append(msgs, g.Field+": "+g.Reason)
		}
		return fail(fleetv1.UnsupportedReason, fmt.Sprintf("HypervisorCluster %s (%s) cannot give this network: %s", cluster, connection.ProviderOf(hc), strings.Join(msgs, "; ")))
	}
	out, err := nw.EnsureNetwork(ctx, v)
	if err != nil {
		return fail(reasonOf(err), fmt.Sprintf("defining the network on HypervisorCluster %s: %v", cluster, err))
	}
	rz.Ready, rz.Bridge, rz.SecurityGroup = true, out.Bridge, out.SecurityGroup
	if out.VLAN != 0 {
		rz.VLAN = ptr.To(int32(out.VLAN))
	}
	if !realizedBefore(n, rz) {
		r.Recorder.Eventf(n, corev1.EventTypeNormal, fleetv1.NetworkRealizedEventReason, "defined on HypervisorCluster %s as %s", cluster, out.Bridge)
	}
	return rz
}

func realizedBefore(n *fleetv1.VMNetwork, rz fleetv1.VMNetworkRealization) bool {
	for _, old := range n.Status.Realizations {
		if old.Cluster == rz.Cluster {
			return old.Ready && old.Bridge == rz.Bridge
		}
	}
	return false
}

// remove deletes the network's objects from one HypervisorCluster. A cluster that is gone leaves
// nothing HyperFleet can reach: its objects stay on the hypervisor.
func (r *Reconciler) remove(ctx context.Context, n *fleetv1.VMNetwork, cluster string) error {
	hc := &infrav1.HypervisorCluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: n.Namespace, Name: cluster}, hc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
	p, err := r.Registry.Get(ctx, hc)
	if err != nil {
		return err
	}
	nw, _ := hypervisor.As[hypervisor.Networker](p)
	if nw == nil {
		return nil // nothing was ever defined there
	}
	return nw.DeleteNetwork(ctx, n.Status.NetworkID, owner(hc))
}

// reconcileDelete removes the network once no VM uses it: a VM's NIC on a vanished network would
// lose its traffic, so the deletion waits, saying which VMs hold it.
func (r *Reconciler) reconcileDelete(ctx context.Context, n *fleetv1.VMNetwork, attached []string) (ctrl.Result, error) {
	n.Status.Phase = fleetv1.VMNetworkDeleting
	if len(attached) > 0 {
		msg := fmt.Sprintf("%d VM(s) still use the network: %s; delete them (or their pools) first", len(attached), listed(attached))
		conditions.Set(n, metav1.Condition{Type: fleetv1.InUseCondition, Status: metav1.ConditionTrue, Reason: fleetv1.VMsAttachedReason, Message: msg})
		conditions.Set(n, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: fleetv1.VMsAttachedReason, Message: "deleting: " + msg})
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	}
	conditions.Set(n, metav1.Condition{Type: fleetv1.InUseCondition, Status: metav1.ConditionFalse, Reason: "NoVMs", Message: "no VM uses the network"})
	var errs []error
	for _, rz := range n.Status.Realizations {
		err := r.remove(ctx, n, rz.Cluster)
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
		conditions.Set(n, metav1.Condition{Type: fleetv1.ReadyCondition, Status: metav1.ConditionFalse, Reason: reasonOf(errs[0]), Message: "deleting: " + err.Error()})
		return ctrl.Result{RequeueAfter: 30 * time.Second}, nil
	}
	controllerutil.RemoveFinalizer(n, fleetv1.VMNetworkFinalizer)
	return ctrl.Result{}, nil
}

// attachedClaims lists the MachineClaims ("namespace/name") with a NIC on the network, sorted.
func (r *Reconciler) attachedClaims(ctx context.Context, n *fleetv1.VMNetwork) ([]string, error) {
	var claims infrav1.MachineClaimList
	if err := r.Client.List(ctx, &claims, client.MatchingFields{ClaimNetworkIndex: n.Namespace + "/" + n.Name}); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(claims.Items))
	for _, c := range claims.Items {
		out = append(out, c.Namespace+"/"+c.Name)
	}
	slices.Sort(out)
	return out, nil
}

// countAddresses fills status.addresses from the IPAddresses allocated from the network.
func (r *Reconciler) countAddresses(ctx context.Context, n *fleetv1.VMNetwork) error {
	rng, ok, err := vmnetwork.IPAMRange(n)
	if err != nil || !ok {
		n.Status.Addresses = nil
		return nil //nolint:nilerr // a bad range is reported by realize
	}
	var addrs ipamv1.IPAddressList
	if err := r.Client.List(ctx, &addrs, client.MatchingLabels{fleetv1.VMNetworkNameLabel: vmnetwork.Key(n.Namespace, n.Name)}); err != nil {
		return err
	}
	total, used := rng.Size(), int32(len(addrs.Items))
	n.Status.Addresses = &fleetv1.VMNetworkAddresses{Total: total, Allocated: used, Available: max(total-used, 0)}
	return nil
}

func (r *Reconciler) resync() time.Duration {
	if r.Resync > 0 {
		return r.Resync
	}
	return 10 * time.Minute
}

// setSummary sets the phase and Ready from the realisations.
func setSummary(n *fleetv1.VMNetwork) {
	rs := make([]condition.Realization, 0, len(n.Status.Realizations))
	for _, rz := range n.Status.Realizations {
		rs = append(rs, condition.Realization{Cluster: rz.Cluster, Ready: rz.Ready, Reason: rz.Reason, Message: rz.Message})
	}
	n.Status.Phase = map[condition.Realized]fleetv1.VMNetworkPhase{condition.RealizedNowhere: fleetv1.VMNetworkPending,
		condition.RealizedPartly: fleetv1.VMNetworkDegraded, condition.RealizedEverywhere: fleetv1.VMNetworkReady}[condition.Summarize(n, rs)]
}

// owner is the ownership the network's objects on hc carry.
func owner(hc *infrav1.HypervisorCluster) hypervisor.Ownership {
	return hypervisor.Ownership{Cluster: hc.Namespace + "/" + hc.Name}
}

// reasonOf classifies a hypervisor error for a realisation's reason.
func reasonOf(err error) string { return condition.HypervisorReason(err) }

func listed(names []string) string {
	if len(names) > 10 {
		return strings.Join(names[:10], ", ") + fmt.Sprintf(" and %d more", len(names)-10)
	}
	return strings.Join(names, ", ")
}

// SetupWithManager registers the network and IPAM reconcilers and the claim index they share.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &infrav1.MachineClaim{}, ClaimNetworkIndex, claimNetworks); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleetv1.VMNetwork{}).
		Watches(&infrav1.MachineClaim{}, handler.EnqueueRequestsFromMapFunc(networksOfClaim)).
		Watches(&ipamv1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(networkOfAddress)).
		Watches(&infrav1.HypervisorCluster{}, handler.EnqueueRequestsFromMapFunc(r.networksOfCluster)).
		WithOptions(opts).
		Named("vmnetwork").
		Complete(r)
}

// claimNetworks is the index function of ClaimNetworkIndex.
func claimNetworks(o client.Object) []string {
	c, ok := o.(*infrav1.MachineClaim)
	if !ok {
		return nil
	}
	var out []string
	for _, nic := range c.Spec.NICs {
		if nic.Network == nil {
			continue
		}
		ns := nic.Network.Namespace
		if ns == "" {
			ns = c.Namespace
		}
		if key := ns + "/" + nic.Network.Name; !slices.Contains(out, key) {
			out = append(out, key)
		}
	}
	return out
}

func networksOfClaim(_ context.Context, o client.Object) []ctrl.Request {
	var out []ctrl.Request
	for _, key := range claimNetworks(o) {
		ns, name, _ := strings.Cut(key, "/")
		out = append(out, ctrl.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}})
	}
	return out
}

func networkOfAddress(_ context.Context, o client.Object) []ctrl.Request {
	key, ok := o.GetLabels()[fleetv1.VMNetworkNameLabel]
	if !ok {
		return nil
	}
	ns, name, ok := strings.Cut(key, ".")
	if !ok {
		return nil
	}
	return []ctrl.Request{{NamespacedName: client.ObjectKey{Namespace: ns, Name: name}}}
}

func (r *Reconciler) networksOfCluster(ctx context.Context, o client.Object) []ctrl.Request {
	var nets fleetv1.VMNetworkList
	if err := r.Client.List(ctx, &nets, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []ctrl.Request
	for _, n := range nets.Items {
		if slices.ContainsFunc(n.Spec.Clusters, func(c fleetv1.LocalObjectReference) bool { return c.Name == o.GetName() }) {
			out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&n)})
		}
	}
	return out
}
