package vmpool

import (
	"math"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

// Tolerance is the HorizontalPodAutoscaler's: a usage within 10% of the target changes nothing.
const Tolerance = 0.1

// maxHistory bounds the records kept in status.
const maxHistory = 500

// The HorizontalPodAutoscaler's default behaviour.
var (
	defaultScaleUp = fleetv1.VMPoolScalingRules{
		StabilizationWindowSeconds: ptr.To[int32](0),
		SelectPolicy:               ptr.To(fleetv1.MaxChangePolicySelect),
		Policies: []fleetv1.VMPoolScalingPolicy{
			{Type: fleetv1.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			{Type: fleetv1.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
		},
	}
	defaultScaleDown = fleetv1.VMPoolScalingRules{
		StabilizationWindowSeconds: ptr.To[int32](300),
		SelectPolicy:               ptr.To(fleetv1.MaxChangePolicySelect),
		Policies: []fleetv1.VMPoolScalingPolicy{
			{Type: fleetv1.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
)

// Observation is what the autoscaler sees of a pool at one evaluation.
type Observation struct {
	Now time.Time
	// Current is spec.replicas.
	Current int32
	// Usage is the pool's measured utilisation (Measure).
	Usage Utilisation
}

// Decision is the autoscaler's answer: the replicas to set and the status to record (with the
// history the next evaluation needs).
type Decision struct {
	Desired int32
	Status  fleetv1.VMPoolAutoscalingStatus
}

// Autoscale decides a pool's replicas with the HorizontalPodAutoscaler's algorithm:
//
//   - a pool outside [minReplicas, maxReplicas] is brought inside at once; a pool of 0 is left
//     alone (as the HPA leaves a target scaled to zero);
//   - for each target, desired = ceil(current × usage / target) unless the usage is within 10% of
//     the target; VMs that report no usage count as idle when scaling up and as at the target when
//     scaling down, so they never push the pool the other way; the largest recommendation wins;
//     without any usage the pool keeps its size;
//   - stabilisation: scaling up takes the lowest, scaling down the highest recommendation within
//     its window (scaleUp 0 s, scaleDown 300 s by default);
//   - step policies limit the change per period, counted from the pool's size at the start of the
//     period (by default up: 100% or 4 VMs per 15 s, whichever is more; down: 100% per 15 s);
//   - the result is clamped to [minReplicas, maxReplicas].
//
// prev is the status the last decision recorded (nil the first time).
func Autoscale(spec fleetv1.VMPoolAutoscaling, prev *fleetv1.VMPoolAutoscalingStatus, in Observation) Decision {
	var st fleetv1.VMPoolAutoscalingStatus
	if prev != nil {
		st = *prev.DeepCopy()
	}
	st.CurrentCPUUtilizationPercent = percent(in.Usage.CPU)
	st.CurrentMemoryUtilizationPercent = percent(in.Usage.Memory)
	minR, maxR := ptr.Deref(spec.MinReplicas, 1), spec.MaxReplicas
	up, down := rules(spec.Behavior, true), rules(spec.Behavior, false)
	current := in.Current

	var desired int32
	switch {
	case current == 0:
		desired = 0
	case current > maxR:
		desired = maxR
	case current < minR:
		desired = minR
	default:
		recommendation, ok := recommend(spec, in)
		if !ok {
			recommendation = current
		}
		desired = stabilise(&st, recommendation, current, in.Now, up, down)
		desired = limitRate(st.ScaleEvents, desired, current, in.Now, up, down, minR, maxR)
	}
	if desired != current {
		st.ScaleEvents = append(st.ScaleEvents, fleetv1.VMPoolScaleRecord{Time: metav1.NewTime(in.Now), Replicas: desired - current})
		st.LastScaleTime = ptr.To(metav1.NewTime(in.Now))
	}
	st.ScaleEvents = prune(st.ScaleEvents, in.Now, longestPeriod(up, down))
	st.DesiredReplicas = desired
	return Decision{Desired: desired, Status: st}
}

// recommend is the HPA's replica calculation over the targets set; false when no target has a
// measurement.
func recommend(spec fleetv1.VMPoolAutoscaling, in Observation) (int32, bool) {
	best, ok := int32(0), false
	for _, m := range []struct {
		target *int32
		usage  *float64
	}{{spec.TargetCPUUtilizationPercent, in.Usage.CPU}, {spec.TargetMemoryUtilizationPercent, in.Usage.Memory}} {
		if m.target == nil || m.usage == nil || in.Usage.VMs == 0 {
			continue
		}
		r := replicasFor(*m.usage, float64(*m.target)/100, in.Usage.VMs, int(in.Current))
		if !ok || r > best {
			best, ok = r, true
		}
	}
	return best, ok
}

// replicasFor is the HPA's calculation for one metric: usage is the average over measured VMs of
// current VMs.
func replicasFor(usage, target float64, measured, current int) int32 {
	ratio := usage / target
	if math.Abs(ratio-1) <= Tolerance {
		return int32(current)
	}
	if missing := current - measured; missing > 0 {
		sum := usage * float64(measured)
		adjusted := (sum + float64(missing)*target) / (float64(current) * target)
		if ratio > 1 {
			adjusted = sum / (float64(current) * target)
		}
		// The VMs without figures must not turn the decision around (or make it negligible).
		if math.Abs(adjusted-1) <= Tolerance || (adjusted < 1) != (ratio < 1) {
			return int32(current)
		}
		ratio, measured = adjusted, current
	}
	return int32(math.Ceil(ratio * float64(measured)))
}

// stabilise records recommendation and returns the HPA's stabilised recommendation: no higher
// than the lowest of the scale-up window, no lower than the highest of the scale-down window.
func stabilise(st *fleetv1.VMPoolAutoscalingStatus, recommendation, current int32, now time.Time, up, down fleetv1.VMPoolScalingRules) int32 {
	upCutoff := now.Add(-time.Duration(ptr.Deref(up.StabilizationWindowSeconds, 0)) * time.Second)
	downCutoff := now.Add(-time.Duration(ptr.Deref(down.StabilizationWindowSeconds, 0)) * time.Second)
	upRec, downRec := recommendation, recommendation
	for _, r := range st.Recommendations {
		if r.Time.After(upCutoff) {
			upRec = min(upRec, r.Replicas)
		}
		if r.Time.After(downCutoff) {
			downRec = max(downRec, r.Replicas)
		}
	}
	// Consecutive equal recommendations keep only the newest time: the windows' minimum and
	// maximum are the same, and the history stays short.
	if n := len(st.Recommendations); n > 0 && st.Recommendations[n-1].Replicas == recommendation {
		st.Recommendations[n-1].Time = metav1.NewTime(now)
	} else {
		st.Recommendations = append(st.Recommendations, fleetv1.VMPoolScaleRecord{Time: metav1.NewTime(now), Replicas: recommendation})
	}
	longest := max(ptr.Deref(up.StabilizationWindowSeconds, 0), ptr.Deref(down.StabilizationWindowSeconds, 0))
	st.Recommendations = prune(st.Recommendations, now, longest)
	out := current
	if out < upRec {
		out = upRec
	}
	if out > downRec {
		out = downRec
	}
	return out
}

// limitRate applies the direction's step policies and [minR, maxR].
func limitRate(events []fleetv1.VMPoolScaleRecord, desired, current int32, now time.Time, up, down fleetv1.VMPoolScalingRules, minR, maxR int32) int32 {
	switch {
	case desired > current:
		limit := scaleUpLimit(events, current, now, up)
		if limit < current {
			limit = current
		}
		return min(desired, limit, maxR)
	case desired < current:
		limit := scaleDownLimit(events, current, now, down)
		if limit > current {
			limit = current
		}
		return max(desired, limit, minR)
	}
	return max(min(desired, maxR), minR)
}

// changes sums the replicas added and removed within period before now.
func changes(events []fleetv1.VMPoolScaleRecord, now time.Time, periodSeconds int32) (added, removed int32) {
	cutoff := now.Add(-time.Duration(periodSeconds) * time.Second)
	for _, e := range events {
		if !e.Time.After(cutoff) {
			continue
		}
		if e.Replicas > 0 {
			added += e.Replicas
		} else {
			removed -= e.Replicas
		}
	}
	return added, removed
}

func scaleUpLimit(events []fleetv1.VMPoolScaleRecord, current int32, now time.Time, r fleetv1.VMPoolScalingRules) int32 {
	sel := ptr.Deref(r.SelectPolicy, fleetv1.MaxChangePolicySelect)
	if sel == fleetv1.DisabledPolicySelect {
		return current
	}
	result := int32(math.MinInt32)
	pick := func(a, b int32) int32 { return max(a, b) }
	if sel == fleetv1.MinChangePolicySelect {
		result, pick = math.MaxInt32, func(a, b int32) int32 { return min(a, b) }
	}
	for _, p := range r.Policies {
		added, removed := changes(events, now, p.PeriodSeconds)
		start := current - added + removed
		var proposed int32
		if p.Type == fleetv1.PodsScalingPolicy {
			proposed = start + p.Value
		} else {
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		}
		result = pick(result, proposed)
	}
	return result
}

func scaleDownLimit(events []fleetv1.VMPoolScaleRecord, current int32, now time.Time, r fleetv1.VMPoolScalingRules) int32 {
	sel := ptr.Deref(r.SelectPolicy, fleetv1.MaxChangePolicySelect)
	if sel == fleetv1.DisabledPolicySelect {
		return current
	}
	result := int32(math.MaxInt32)
	pick := func(a, b int32) int32 { return min(a, b) }
	if sel == fleetv1.MinChangePolicySelect {
		result, pick = math.MinInt32, func(a, b int32) int32 { return max(a, b) }
	}
	for _, p := range r.Policies {
		added, removed := changes(events, now, p.PeriodSeconds)
		start := current - added + removed
		var proposed int32
		if p.Type == fleetv1.PodsScalingPolicy {
			proposed = start - p.Value
		} else {
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

// rules is the behaviour of one direction with the HPA's defaults for what is unset.
func rules(b *fleetv1.VMPoolScalingBehavior, up bool) fleetv1.VMPoolScalingRules {
	out, set := defaultScaleDown, (*fleetv1.VMPoolScalingRules)(nil)
	if up {
		out = defaultScaleUp
	}
	out = *out.DeepCopy()
	if b != nil {
		set = b.ScaleDown
		if up {
			set = b.ScaleUp
		}
	}
	if set == nil {
		return out
	}
	if set.StabilizationWindowSeconds != nil {
		out.StabilizationWindowSeconds = set.StabilizationWindowSeconds
	}
	if set.SelectPolicy != nil {
		out.SelectPolicy = set.SelectPolicy
	}
	if len(set.Policies) > 0 {
		out.Policies = slices.Clone(set.Policies)
	}
	return out
}

func longestPeriod(rs ...fleetv1.VMPoolScalingRules) int32 {
	var longest int32
	for _, r := range rs {
		for _, p := range r.Policies {
			longest = max(longest, p.PeriodSeconds)
		}
	}
	return longest
}

// prune drops records older than seconds before now and keeps at most maxHistory.
func prune(records []fleetv1.VMPoolScaleRecord, now time.Time, seconds int32) []fleetv1.VMPoolScaleRecord {
	cutoff := now.Add(-time.Duration(seconds) * time.Second)
	out := records[:0:0]
	for _, r := range records {
		if r.Time.After(cutoff) {
			out = append(out, r)
		}
	}
	if len(out) > maxHistory {
		out = out[len(out)-maxHistory:]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func percent(v *float64) *int32 {
	if v == nil {
		return nil
	}
	return ptr.To(int32(math.Round(*v * 100)))
}
