package console

import (
	"context"
	"net/http"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// Storage is one VMStorage as a person sees it.
type Storage struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Type is the backend: dir, zfspool, lvmthin, nfs, directory or datastore.
	Type string `json:"type"`
	Tier string `json:"tier,omitempty"`
	// Adopt is an existing storage HyperFleet uses as it is and never changes.
	Adopt bool `json:"adopt,omitempty"`
	// StorageName is the storage's name on the hypervisor.
	StorageName       string   `json:"storageName"`
	Clusters          []string `json:"clusters"`
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
	Phase             string   `json:"phase,omitempty"`
	// Ready, Reason and Message are the Ready condition's (Ready is Unknown until it is set).
	Ready        string               `json:"ready"`
	Reason       string               `json:"reason,omitempty"`
	Message      string               `json:"message,omitempty"`
	Realizations []StorageRealization `json:"realizations,omitempty"`
	// UsedBytes and AvailableBytes are summed over the realisations (a shared storage once).
	UsedBytes      int64 `json:"usedBytes"`
	AvailableBytes int64 `json:"availableBytes"`
	// Allocations counts the VMs placed on the storage, AllocatedBytes their disks.
	Allocations    int32 `json:"allocations"`
	AllocatedBytes int64 `json:"allocatedBytes"`
	// Replication is the storage's replication target and schedule, when set.
	Replication *StorageReplication `json:"replication,omitempty"`
	// Replicated is the Replicated condition, present when replication is set.
	Replicated *ConditionState `json:"replicated,omitempty"`
	// LastReplication is the oldest last successful replication among the storage's VMs.
	LastReplication *time.Time `json:"lastReplication,omitempty"`
	Deleting        bool       `json:"deleting,omitempty"`
	Created         time.Time  `json:"created"`
}

// StorageReplication is where and how often a storage's VMs are replicated.
type StorageReplication struct {
	TargetNode string `json:"targetNode"`
	Schedule   string `json:"schedule,omitempty"`
}

// ConditionState is one condition's status, reason and message.
type ConditionState struct {
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// StorageRealization is the storage on one HypervisorCluster, with each node's capacity.
type StorageRealization struct {
	Cluster string `json:"cluster"`
	Ready   bool   `json:"ready"`
	// Shared storage is one pool seen from every node.
	Shared  bool          `json:"shared,omitempty"`
	Nodes   []StorageNode `json:"nodes,omitempty"`
	Reason  string        `json:"reason,omitempty"`
	Message string        `json:"message,omitempty"`
}

// StorageNode is a storage's capacity on one node.
type StorageNode struct {
	Node string `json:"node"`
	// Active is false when the node cannot reach the storage.
	Active         bool  `json:"active"`
	TotalBytes     int64 `json:"totalBytes"`
	UsedBytes      int64 `json:"usedBytes"`
	AvailableBytes int64 `json:"availableBytes"`
}

// StorageDetail is a storage with the VMs placed on it.
type StorageDetail struct {
	Storage
	// VMs are the MachineClaims whose status.storage names the storage, that the caller may
	// read.
	VMs []StorageVM `json:"vms"`
	// VMsHiddenIn are the namespaces the storage is shared with whose MachineClaims the caller
	// may not read: their VMs are counted in allocations but not listed.
	VMsHiddenIn []string `json:"vmsHiddenIn,omitempty"`
}

// StorageVM is one VM placed on a storage.
type StorageVM struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Node      string `json:"node,omitempty"`
	// Bytes of the VM's disks on the storage.
	Bytes int64  `json:"bytes,omitempty"`
	Phase string `json:"phase,omitempty"`
}

func storageOf(st *fleetv1.VMStorage) Storage {
	out := Storage{Namespace: st.Namespace, Name: st.Name, Type: string(st.Spec.Type), Tier: st.Spec.Tier, Adopt: st.Spec.Adopt,
		StorageName: st.Spec.StorageName, AllowedNamespaces: st.Spec.AllowedNamespaces, Phase: string(st.Status.Phase),
		Ready: "Unknown", UsedBytes: st.Status.UsedBytes, AvailableBytes: st.Status.AvailableBytes,
		Allocations: st.Status.Allocations, AllocatedBytes: st.Status.AllocatedBytes,
		Deleting: !st.DeletionTimestamp.IsZero(), Created: st.CreationTimestamp.Time, Clusters: []string{}}
	if out.StorageName == "" {
		out.StorageName = st.Name
	}
	for _, c := range st.Spec.Clusters {
		out.Clusters = append(out.Clusters, c.Name)
	}
	if c := meta.FindStatusCondition(st.Status.Conditions, fleetv1.ReadyCondition); c != nil {
		out.Ready, out.Reason, out.Message = string(c.Status), c.Reason, c.Message
	}
	if r := st.Spec.Replication; r != nil {
		out.Replication = &StorageReplication{TargetNode: r.TargetNode, Schedule: r.Schedule}
	}
	if c := meta.FindStatusCondition(st.Status.Conditions, fleetv1.ReplicatedCondition); c != nil {
		out.Replicated = &ConditionState{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
	}
	if t := st.Status.LastReplication; t != nil {
		last := t.Time
		out.LastReplication = &last
	}
	for _, r := range st.Status.Realizations {
		rz := StorageRealization{Cluster: r.Cluster, Ready: r.Ready, Shared: r.Shared, Reason: r.Reason, Message: r.Message}
		for _, n := range r.Nodes {
			rz.Nodes = append(rz.Nodes, StorageNode{Node: n.Node, Active: n.Active, TotalBytes: n.TotalBytes,
				UsedBytes: n.UsedBytes, AvailableBytes: n.AvailableBytes})
		}
		out.Realizations = append(out.Realizations, rz)
	}
	return out
}

// listStorages lists the VMStorages c may see.
func (s *Server) listStorages(ctx context.Context, c client.Client, namespace string) ([]Storage, error) {
	var out []Storage
	err := listVisible(ctx, c, s.inventory.Namespaces(), namespace, func() *fleetv1.VMStorageList { return &fleetv1.VMStorageList{} },
		func(l *fleetv1.VMStorageList) {
			for i := range l.Items {
				out = append(out, storageOf(&l.Items[i]))
			}
		})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out, err
}

// getStorage reads one VMStorage and the VMs placed on it as c: the claims of its own namespace
// and of those it is shared with, each read only where c may.
func getStorage(ctx context.Context, c client.Client, namespace, name string) (StorageDetail, error) {
	st := &fleetv1.VMStorage{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, st); err != nil {
		return StorageDetail{}, err
	}
	d := StorageDetail{Storage: storageOf(st), VMs: []StorageVM{}}
	for _, ns := range usingNamespaces(st.Namespace, st.Spec.AllowedNamespaces) {
		var claims infrav1.MachineClaimList
		err := c.List(ctx, &claims, client.InNamespace(ns))
		if apierrors.IsForbidden(err) {
			d.VMsHiddenIn = append(d.VMsHiddenIn, ns)
			continue
		}
		if err != nil {
			return StorageDetail{}, err
		}
		for _, cl := range claims.Items {
			if p := cl.Status.Storage; p != nil && p.Name == st.Name && p.Namespace == st.Namespace {
				d.VMs = append(d.VMs, StorageVM{Namespace: cl.Namespace, Name: cl.Name, Node: cl.Status.Node, Bytes: p.Bytes,
					Phase: string(cl.Status.Phase)})
			}
		}
	}
	sort.Slice(d.VMs, func(i, j int) bool {
		if d.VMs[i].Namespace != d.VMs[j].Namespace {
			return d.VMs[i].Namespace < d.VMs[j].Namespace
		}
		return d.VMs[i].Name < d.VMs[j].Name
	})
	return d, nil
}

func (s *Server) getStorages(w http.ResponseWriter, r *http.Request, c *caller) {
	storages, err := s.listStorages(r.Context(), c.Client, r.URL.Query().Get("namespace"))
	if err != nil {
		writeKubeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, List[Storage]{Items: nonNilSlice(storages)})
}

func (s *Server) getStorageDetail(w http.ResponseWriter, r *http.Request, c *caller) {
	d, err := getStorage(r.Context(), c.Client, r.PathValue("namespace"), r.PathValue("name"))
	if err != nil {
		writeHiddenError(w, r, "VMStorage", err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}
