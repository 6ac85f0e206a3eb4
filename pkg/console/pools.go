package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	infrav1 "github.com/hyperfleet-io/hyperfleet/api/infrastructure/v1alpha1"
)

// The kinds of pool the console lists and scales.
const (
	KindRunnerPool = "RunnerPool"
	KindVMPool     = "VMPool"
)

// maxVMPoolReplicas is the most VMs a VMPool may ask for (its CRD's bound on spec.replicas).
const maxVMPoolReplicas = 1000

// errBadPoolKind: a kind parameter names no kind of pool.
var errBadPoolKind = errors.New("must be RunnerPool or VMPool")

// parsePoolKind reads a kind parameter: RunnerPool or VMPool, any case; empty is def.
func parsePoolKind(v, def string) (string, error) {
	switch {
	case v == "":
		return def, nil
	case strings.EqualFold(v, KindRunnerPool):
		return KindRunnerPool, nil
	case strings.EqualFold(v, KindVMPool):
		return KindVMPool, nil
	}
	return "", errBadPoolKind
}

// Pool is one pool: a RunnerPool of CI runners or a VMPool of long-lived VMs.
type Pool struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Cluster   string `json:"cluster"`
	// Platform, Scope, Labels, idle, busy and the queue are a RunnerPool's: empty for a VMPool.
	Platform string   `json:"platform"`
	Scope    string   `json:"scope,omitempty"`
	Labels   []string `json:"labels,omitempty"`
	// Min and Max bound the size the pool may be scaled to: a RunnerPool's spec, a VMPool's
	// spec.autoscaling when set, else 0 and 1000 (its CRD's bounds).
	Min int32 `json:"minReplicas"`
	Max int32 `json:"maxReplicas"`
	// Replicas is how many VMs the pool has (status.replicas); Desired how many it is asked for
	// (a RunnerPool's status.desiredReplicas, a VMPool's spec.replicas).
	Replicas   int32 `json:"replicas"`
	Desired    int32 `json:"desiredReplicas"`
	Ready      int32 `json:"readyReplicas"`
	Idle       int32 `json:"idleReplicas"`
	Busy       int32 `json:"busyReplicas"`
	QueuedJobs int32 `json:"queuedJobs"`
	// Available (ready for minReadySeconds) and Updated (of the current template) are a VMPool's.
	Available *int32 `json:"availableReplicas,omitempty"`
	Updated   *int32 `json:"updatedReplicas,omitempty"`
	// Strategy is a VMPool's update strategy: RollingUpdate or Recreate.
	Strategy string `json:"strategy,omitempty"`
	// Autoscaling is set when a VMPool sizes itself (spec.autoscaling): it is not scaled by hand.
	Autoscaling bool `json:"autoscaling,omitempty"`
	// OldestQueuedSeconds is how long the longest-waiting queued job has waited, and
	// PickupMedianSeconds the median wait of the jobs running now before a runner took them, from
	// the pool's job ledger; absent when there are no such jobs or the caller may not read it.
	OldestQueuedSeconds *int64 `json:"oldestQueuedSeconds,omitempty"`
	PickupMedianSeconds *int64 `json:"pickupMedianSeconds,omitempty"`
	// ScaleTo is the size the pool is asked to have: spec.replicas, else what demand decided.
	ScaleTo int32 `json:"-"`
	// SpecReplicas is the size set through the pool's scale subresource (spec.replicas), unset
	// when none was set.
	SpecReplicas *int32 `json:"specReplicas,omitempty"`
	// Reason and Message are the pool's Ready condition's.
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// ProgressingReason and ProgressingMessage are a VMPool's Progressing condition's.
	ProgressingReason  string `json:"progressingReason,omitempty"`
	ProgressingMessage string `json:"progressingMessage,omitempty"`
}

func poolOf(p *fleetv1.RunnerPool) Pool {
	platform, scope := poolPlatform(p)
	out := Pool{Kind: KindRunnerPool, Namespace: p.Namespace, Name: p.Name, Cluster: p.Spec.ClusterName, Platform: platform,
		Scope: scope, Labels: poolLabels(p), Min: p.Spec.MinReplicas, Max: p.Spec.MaxReplicas, Replicas: p.Status.Replicas,
		Desired: p.Status.DesiredReplicas, Ready: p.Status.ReadyReplicas, Idle: p.Status.IdleReplicas,
		Busy: p.Status.BusyReplicas, QueuedJobs: p.Status.QueuedJobs}
	out.ScaleTo = max(p.Status.DesiredReplicas, p.Spec.MinReplicas)
	if p.Spec.Replicas != nil {
		out.ScaleTo = *p.Spec.Replicas
		out.SpecReplicas = ptr.To(*p.Spec.Replicas)
	}
	if c := conditions.Get(p, infrav1.ReadyCondition); c != nil {
		out.Reason, out.Message = c.Reason, c.Message
	}
	return out
}

func vmPoolOf(p *fleetv1.VMPool) Pool {
	available, updated := p.Status.AvailableReplicas, p.Status.UpdatedReplicas
	out := Pool{Kind: KindVMPool, Namespace: p.Namespace, Name: p.Name, Cluster: p.Spec.Template.Spec.HypervisorClusterName,
		Min: 0, Max: maxVMPoolReplicas, Replicas: p.Status.Replicas, Desired: 1, Ready: p.Status.ReadyReplicas,
		Available: &available, Updated: &updated, Strategy: string(p.Spec.Strategy.Type)}
	if p.Spec.Replicas != nil {
		out.Desired = *p.Spec.Replicas
		out.SpecReplicas = ptr.To(*p.Spec.Replicas)
	}
	out.ScaleTo = out.Desired
	if out.Strategy == "" {
		out.Strategy = string(fleetv1.RollingUpdateVMPoolStrategy)
	}
	if a := p.Spec.Autoscaling; a != nil {
		out.Autoscaling, out.Min, out.Max = true, 1, a.MaxReplicas
		if a.MinReplicas != nil {
			out.Min = *a.MinReplicas
		}
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, fleetv1.ReadyCondition); c != nil {
		out.Reason, out.Message = c.Reason, c.Message
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, fleetv1.ProgressingCondition); c != nil {
		out.ProgressingReason, out.ProgressingMessage = c.Reason, c.Message
	}
	return out
}

// listPools lists the pools c may see, of kind (both when empty). Each kind is listed as the
// person: one they may not list in namespace is left out rather than failing the other, and
// only a refusal of every kind asked for is the person's 403.
func (s *Server) listPools(ctx context.Context, c client.Client, namespace, kind string) ([]Pool, error) {
	var pools []Pool
	var errs []error
	if kind == "" || kind == KindRunnerPool {
		errs = append(errs, listVisible(ctx, c, s.inventory.Namespaces(), namespace, func() *fleetv1.RunnerPoolList { return &fleetv1.RunnerPoolList{} },
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
			}))
	}
	if kind == "" || kind == KindVMPool {
		errs = append(errs, listVisible(ctx, c, s.inventory.Namespaces(), namespace, func() *fleetv1.VMPoolList { return &fleetv1.VMPoolList{} },
			func(l *fleetv1.VMPoolList) {
				for i := range l.Items {
					pools = append(pools, vmPoolOf(&l.Items[i]))
				}
			}))
	}
	sort.Slice(pools, func(i, j int) bool {
		a, b := pools[i], pools[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Kind < b.Kind
	})
	return pools, poolListError(errs)
}

// poolListError is the error of listing several kinds: any that is not a refusal, else a refusal
// when every kind was refused, else none.
func poolListError(errs []error) error {
	var forbidden error
	refused := 0
	for _, err := range errs {
		switch {
		case err == nil:
		case apierrors.IsForbidden(err):
			refused++
			forbidden = err
		default:
			return err
		}
	}
	if refused == len(errs) {
		return forbidden
	}
	return nil
}

func (s *Server) getPools(w http.ResponseWriter, r *http.Request, c *caller) {
	q := r.URL.Query()
	kind, err := parsePoolKind(q.Get("kind"), "")
	if err != nil {
		writeProblem(w, r, http.StatusBadRequest, "Invalid kind", "kind "+err.Error(), []FieldError{{Field: "kind", Message: err.Error()}})
		return
	}
	pools, err := s.listPools(r.Context(), c.Client, q.Get("namespace"), kind)
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
// The kind query parameter says which pool: RunnerPool (the default) or VMPool.
func (s *Server) patchPool(w http.ResponseWriter, r *http.Request, c *caller) {
	kind, err := parsePoolKind(r.URL.Query().Get("kind"), KindRunnerPool)
	if err != nil {
		writeProblem(w, r, http.StatusBadRequest, "Invalid kind", "kind "+err.Error(), []FieldError{{Field: "kind", Message: err.Error()}})
		return
	}
	var req ScaleRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	c.auditObject(kind, r.PathValue("namespace"), r.PathValue("name"))
	if req.Replicas != nil {
		c.auditDetail("replicas %d", *req.Replicas)
	}
	pool, fe, err := scalePoolAs(r.Context(), c.Client, kind, r.PathValue("namespace"), r.PathValue("name"), req)
	switch {
	case err != nil:
		writeKubeError(w, r, err)
	case fe != nil:
		writeProblem(w, r, http.StatusUnprocessableEntity, "Invalid scale", fe.Message, []FieldError{*fe})
	default:
		writeJSON(w, http.StatusOK, pool)
	}
}

// scalePoolAs scales the pool kind namespace/name as c, after reading it as c: a refusal or
// absence is Kubernetes' error, a size the pool does not take is a field error.
func scalePoolAs(ctx context.Context, c client.Client, kind, namespace, name string, req ScaleRequest) (Pool, *FieldError, error) {
	key := client.ObjectKey{Namespace: namespace, Name: name}
	if kind == KindVMPool {
		pool := &fleetv1.VMPool{}
		if err := c.Get(ctx, key, pool); err != nil {
			return Pool{}, nil, err
		}
		if fe := validateVMPoolScale(req, pool); fe != nil {
			return Pool{}, fe, nil
		}
		if err := scaleVMPool(ctx, c, pool, *req.Replicas); err != nil {
			return Pool{}, nil, err
		}
		if err := c.Get(ctx, key, pool); err != nil {
			return Pool{}, nil, err
		}
		return vmPoolOf(pool), nil, nil
	}
	pool := &fleetv1.RunnerPool{}
	if err := c.Get(ctx, key, pool); err != nil {
		return Pool{}, nil, err
	}
	if fe := validateScale(req, pool); fe != nil {
		return Pool{}, fe, nil
	}
	if err := scalePool(ctx, c, pool, *req.Replicas); err != nil {
		return Pool{}, nil, err
	}
	if err := c.Get(ctx, key, pool); err != nil {
		return Pool{}, nil, err
	}
	return poolOf(pool), nil, nil
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

// validateVMPoolScale takes a size within the VMPool CRD's bounds, for a pool that does not size
// itself: spec.autoscaling writes spec.replicas and would undo a size set by hand, as a
// HorizontalPodAutoscaler pointed at the pool would fight it.
func validateVMPoolScale(req ScaleRequest, pool *fleetv1.VMPool) *FieldError {
	switch {
	case req.Replicas == nil:
		return &FieldError{Field: "replicas", Message: "is required"}
	case *req.Replicas < 0 || *req.Replicas > maxVMPoolReplicas:
		return &FieldError{Field: "replicas", Message: fmt.Sprintf("must be between 0 and %d", maxVMPoolReplicas)}
	case pool.Spec.Autoscaling != nil:
		a := vmPoolOf(pool)
		return &FieldError{Field: "replicas", Message: fmt.Sprintf("cannot be set by hand: the pool sizes itself with spec.autoscaling "+
			"(%d to %d VMs), which would undo it; change spec.autoscaling, or remove it to scale the pool by hand", a.Min, a.Max)}
	}
	return nil
}

// scaleVMPool sets a VMPool's size through its /scale subresource, on the condition that the pool
// is still the one read (its resourceVersion): a pool given spec.autoscaling meanwhile is a
// conflict, not scaled.
func scaleVMPool(ctx context.Context, c client.Client, pool *fleetv1.VMPool, replicas int32) error {
	scale := &autoscalingv1.Scale{
		ObjectMeta: metav1.ObjectMeta{Namespace: pool.Namespace, Name: pool.Name, ResourceVersion: pool.ResourceVersion},
		Spec:       autoscalingv1.ScaleSpec{Replicas: replicas},
	}
	return c.SubResource("scale").Update(ctx, pool, client.WithSubResourceBody(scale))
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
