package machineclaim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/controllers/claimplacement"
	"github.com/hyperfleet-io/hyperfleet/controllers/clusterruntime"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/vmstorage"
)

const gib = int64(1) << 30

// reconcileStorage finds the VMStorages spec.storage may place the VM's disks on, with their
// room on each node of the claim's hypervisor, before the node is chosen. A storage of another
// namespace is used only when it lists the claim's namespace.
func (r *Reconciler) reconcileStorage(ctx context.Context, s *claimScope) (ctrl.Result, error) {
	c := s.claim
	req := c.Spec.Storage
	if req == nil || c.Status.Storage != nil || c.Status.VMID != "" {
		return ctrl.Result{}, nil
	}
	var stores []fleetv1.VMStorage
	if req.Name != "" {
		ns := req.Namespace
		if ns == "" {
			ns = c.Namespace
		}
		st := &fleetv1.VMStorage{}
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: req.Name}, st); err != nil {
			if apierrors.IsNotFound(err) {
				setVMCondition(c, metav1.ConditionFalse, infrav1.StorageNotFoundReason, fmt.Sprintf("spec.storage names VMStorage %s/%s, which does not exist", ns, req.Name))
				return ctrl.Result{RequeueAfter: networkRetry}, nil
			}
			return ctrl.Result{}, err
		}
		if !vmstorage.Allowed(st, c.Namespace) {
			setVMCondition(c, metav1.ConditionFalse, infrav1.StorageNotAllowedReason,
				fmt.Sprintf("VMStorage %s/%s is not shared with namespace %s (its spec.allowedNamespaces)", ns, st.Name, c.Namespace))
			return ctrl.Result{RequeueAfter: networkRetry}, nil
		}
		stores = append(stores, *st)
	} else {
		var all fleetv1.VMStorageList
		if err := r.Client.List(ctx, &all); err != nil {
			return ctrl.Result{}, err
		}
		for _, st := range all.Items {
			if st.Spec.Tier == req.Tier && st.DeletionTimestamp.IsZero() && vmstorage.Allowed(&st, c.Namespace) {
				stores = append(stores, st)
			}
		}
		if len(stores) == 0 {
			setVMCondition(c, metav1.ConditionFalse, infrav1.StorageNotFoundReason,
				fmt.Sprintf("no VMStorage of tier %s is in namespace %s or shared with it", req.Tier, c.Namespace))
			return ctrl.Result{RequeueAfter: networkRetry}, nil
		}
	}
	claims, err := claimplacement.ClusterClaims(ctx, r.Client, c.Namespace, s.hc.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	var why []string
	for i := range stores {
		st := &stores[i]
		rz, err := vmstorage.RealizationFor(st, s.hc)
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		committed, pending := placedBytes(claims, c.UID, st, rz.Shared)
		// Claims placed an instant ago may not show their storage in the cache yet.
		counted := map[string]bool{}
		for i := range claims {
			if claims[i].Status.Storage != nil {
				counted[clusterruntime.ClaimKey(&claims[i])] = true
			}
		}
		key := st.Namespace + "/" + st.Name
		r.cluster(s).AddPromisedStorage(clusterruntime.ClaimKey(c), key, rz.Shared, counted, pending)
		r.cluster(s).AddPromisedStorage(clusterruntime.ClaimKey(c), key, rz.Shared, counted, committed)
		s.storages = append(s.storages, vmstorage.Candidate{Storage: st, Realization: rz, PendingBytes: pending, CommittedBytes: committed})
	}
	if len(s.storages) == 0 {
		setVMCondition(c, metav1.ConditionFalse, infrav1.WaitingForStorageReason, strings.Join(why, "; "))
		return ctrl.Result{RequeueAfter: networkRetry}, nil
	}
	return ctrl.Result{}, nil
}

// placedBytes are the disks of the cluster's claims placed on st, by node ("" for a shared
// storage): all of them (committed), and those whose clones have not ended (pending), which the
// storage's reported use cannot show yet.
func placedBytes(claims []infrav1.MachineClaim, self types.UID, st *fleetv1.VMStorage, shared bool) (committed, pending map[string]int64) {
	committed, pending = map[string]int64{}, map[string]int64{}
	for i := range claims {
		c := &claims[i]
		p := c.Status.Storage
		if c.UID == self || p == nil || p.Name != st.Name || p.Namespace != st.Namespace {
			continue
		}
		node := c.Status.Node
		if shared {
			node = ""
		}
		committed[node] += p.Bytes
		if c.Status.CompletedStep == "" {
			pending[node] += p.Bytes
		}
	}
	return committed, pending
}

// diskBytes is what the VM's disks take on the storage spec.storage places them on: a full
// clone's boot disk (the template's, or the size it grows to) and the extra disks that name no
// storage of their own.
func diskBytes(c *infrav1.MachineClaim, sources []hypervisor.Template) int64 {
	var total int64
	if c.Spec.CloneMode == infrav1.CloneFull {
		size := int64(c.Spec.DiskSizeGiB)
		for _, t := range sources {
			size = max(size, int64(t.DiskGiB))
		}
		total += size * gib
	}
	for _, d := range c.Spec.Disks {
		if d.Storage == "" {
			total += int64(d.SizeGiB) * gib
		}
	}
	return total
}

// storageNodes keeps the nodes where a storage the claim may use has room for its disks; the
// reason when none has.
func storageNodes(s *claimScope, nodes []hypervisor.Node, bytes int64) ([]hypervisor.Node, string) {
	if len(s.storages) == 0 {
		return nodes, ""
	}
	room := vmstorage.NodesWithRoom(s.storages, bytes)
	kept := slices.DeleteFunc(slices.Clone(nodes), func(n hypervisor.Node) bool { return !slices.Contains(room, n.Name) })
	if len(kept) > 0 {
		return kept, ""
	}
	var parts []string
	for _, cand := range s.storages {
		var per []string
		for _, n := range cand.Realization.Nodes {
			per = append(per, fmt.Sprintf("%s %.1f GiB free", n.Node, float64(cand.Room(n.Node))/float64(gib)))
		}
		parts = append(parts, fmt.Sprintf("%s/%s (%s)", cand.Storage.Namespace, cand.Storage.Name, strings.Join(per, ", ")))
	}
	return nil, fmt.Sprintf("no VMStorage has room for the VM's %.1f GiB of disks on a node it may use: %s", float64(bytes)/float64(gib), strings.Join(parts, "; "))
}

// placeStorage records the storage the VM's disks go to on node, and promises its room until
// the cache shows the choice.
func (r *Reconciler) placeStorage(s *claimScope, node string, bytes int64) {
	if len(s.storages) == 0 {
		return
	}
	cand, ok := vmstorage.Choose(s.storages, node, bytes)
	if !ok {
		return
	}
	s.claim.Status.Storage = &infrav1.PlacedStorage{Name: cand.Storage.Name, Namespace: cand.Storage.Namespace,
		StorageName: vmstorage.StorageName(cand.Storage), Bytes: bytes}
	r.cluster(s).PromiseStorage(s.claim, cand.Storage.Namespace+"/"+cand.Storage.Name, node, bytes)
}
