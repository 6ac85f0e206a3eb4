package console

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// Pool is one pool of runners.
type Pool struct {
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Name       string   `json:"name"`
	Cluster    string   `json:"cluster"`
	Platform   string   `json:"platform"`
	Scope      string   `json:"scope,omitempty"`
	Labels     []string `json:"labels,omitempty"`
	Min        int32    `json:"minReplicas"`
	Max        int32    `json:"maxReplicas"`
	Replicas   int32    `json:"replicas"`
	Desired    int32    `json:"desiredReplicas"`
	Ready      int32    `json:"readyReplicas"`
	Idle       int32    `json:"idleReplicas"`
	Busy       int32    `json:"busyReplicas"`
	QueuedJobs int32    `json:"queuedJobs"`
	// OldestQueuedSeconds is how long the longest-waiting queued job has waited, and
	// PickupMedianSeconds the median wait of the jobs running now before a runner took them, from
	// the pool's job ledger; absent when there are no such jobs or the caller may not read it.
	OldestQueuedSeconds *int64 `json:"oldestQueuedSeconds,omitempty"`
	PickupMedianSeconds *int64 `json:"pickupMedianSeconds,omitempty"`
	// ScaleTo is the size the pool is asked to have: spec.replicas, else what demand decided.
	ScaleTo int32  `json:"-"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

func poolOf(p *fleetv1.RunnerPool) Pool {
	platform, scope := poolPlatform(p)
	out := Pool{Kind: "RunnerPool", Namespace: p.Namespace, Name: p.Name, Cluster: p.Spec.ClusterName, Platform: platform,
		Scope: scope, Labels: poolLabels(p), Min: p.Spec.MinReplicas, Max: p.Spec.MaxReplicas, Replicas: p.Status.Replicas,
		Desired: p.Status.DesiredReplicas, Ready: p.Status.ReadyReplicas, Idle: p.Status.IdleReplicas,
		Busy: p.Status.BusyReplicas, QueuedJobs: p.Status.QueuedJobs}
	out.ScaleTo = max(p.Status.DesiredReplicas, p.Spec.MinReplicas)
	if p.Spec.Replicas != nil {
		out.ScaleTo = *p.Spec.Replicas
	}
	if c := conditions.Get(p, infrav1.ReadyCondition); c != nil {
		out.Reason, out.Message = c.Reason, c.Message
	}
	return out
}

func (s *Server) listPools(ctx context.Context, c client.Client, namespace string) ([]Pool, error) {
	var pools []Pool
	err := listVisible(ctx, c, s.inventory.Namespaces(), namespace, func() *fleetv1.RunnerPoolList { return &fleetv1.RunnerPoolList{} },
		func(l *fleetv1.RunnerPoolList) {
			now := time.Now()
			for i := range l.Items {
				p := poolOf(&l.Items[i])
				if lat, ok := poolLatency(ctx, c, &l.Items[i], now); ok {
					oldest, pickup := int64(lat.OldestQueued.Seconds()), int64(lat.PickupMedian.Seconds())
					if lat.OldestQueued > 0 {
						p.OldestQueuedSeconds = &oldest
					}
					if lat.Running > 0 {
						p.PickupMedianSeconds = &pickup
					}
				}
				pools = append(pools, p)
			}
		})
	sort.Slice(pools, func(i, j int) bool {
		return pools[i].Namespace+"/"+pools[i].Name < pools[j].Namespace+"/"+pools[j].Name
	})
	return pools, err
}

func (s *Server) getPools(w http.ResponseWriter, r *http.Request, c *caller) {
	pools, err := s.listPools(r.Context(), c.Client, r.URL.Query().Get("namespace"))
	if err != nil {
		writeKubeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, List[Pool]{Items: nonNilSlice(pools)})
}

// ScaleRequest sets a pool's size.
type ScaleRequest struct {
	Replicas *int32 `json:"replicas"`
}

// patchPool scales a pool through its /scale subresource, as kubectl scale and autoscalers do.
func (s *Server) patchPool(w http.ResponseWriter, r *http.Request, c *caller) {
	var req ScaleRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	pool := &fleetv1.RunnerPool{}
	if err := c.Client.Get(r.Context(), client.ObjectKey{Namespace: r.PathValue("namespace"), Name: r.PathValue("name")}, pool); err != nil {
		writeKubeError(w, r, err)
		return
	}
	if fe := validateScale(req, pool); fe != nil {
		writeProblem(w, r, http.StatusUnprocessableEntity, "Invalid scale", fe.Message, []FieldError{*fe})
		return
	}
	if err := scalePool(r.Context(), c.Client, pool, *req.Replicas); err != nil {
		writeKubeError(w, r, err)
		return
	}
	if err := c.Client.Get(r.Context(), client.ObjectKeyFromObject(pool), pool); err != nil {
		writeKubeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, poolOf(pool))
}

func validateScale(req ScaleRequest, pool *fleetv1.RunnerPool) *FieldError {
	switch {
	case req.Replicas == nil:
		return &FieldError{Field: "replicas", Message: "is required"}
	case *req.Replicas < pool.Spec.MinReplicas || *req.Replicas > pool.Spec.MaxReplicas:
		return &FieldError{Field: "replicas", Message: fmt.Sprintf("must be between the pool's minReplicas %d and maxReplicas %d",
			pool.Spec.MinReplicas, pool.Spec.MaxReplicas)}
	}
	return nil
}

// scalePool sets a pool's size through its /scale subresource. The API server cannot read the
// scale of a pool whose spec.replicas was never set (it sizes itself from demand), so such a pool
// gets spec.replicas by a merge patch instead, which needs the same right as editing the pool.
func scalePool(ctx context.Context, c client.Client, pool *fleetv1.RunnerPool, replicas int32) error {
	if pool.Spec.Replicas == nil {
		patch := []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
		return c.Patch(ctx, pool, client.RawPatch(types.MergePatchType, patch))
	}
	scale := &autoscalingv1.Scale{}
	if err := c.SubResource("scale").Get(ctx, pool, scale); err != nil {
		return err
	}
	scale.Spec.Replicas = replicas
	return c.SubResource("scale").Update(ctx, pool, client.WithSubResourceBody(scale))
}
