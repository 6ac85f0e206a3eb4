package vmpool

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

// scaler runs Autoscale as the controller does: current follows each decision, the status is
// carried from one evaluation to the next, the clock is a fake one.
type scaler struct {
	spec    fleetv1.VMPoolAutoscaling
	clock   clock.PassiveClock
	current int32
	status  *fleetv1.VMPoolAutoscalingStatus
}

func (s *scaler) observe(cpu float64, vms int) int32 {
	d := Autoscale(s.spec, s.status, Observation{Now: s.clock.Now(), Current: s.current,
		Usage: Utilisation{CPU: ptr.To(cpu), VMs: vms}})
	s.current, s.status = d.Desired, &d.Status
	return d.Desired
}

func cpuTarget(minR, maxR, target int32) fleetv1.VMPoolAutoscaling {
	return fleetv1.VMPoolAutoscaling{MinReplicas: ptr.To(minR), MaxReplicas: maxR, TargetCPUUtilizationPercent: ptr.To(target)}
}

func TestAutoscaleRecommendation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		spec     fleetv1.VMPoolAutoscaling
		current  int32
		usage    Utilisation
		expected int32
	}{
		{"busy pool grows in proportion", cpuTarget(1, 10, 60), 3, Utilisation{CPU: ptr.To(0.9), VMs: 3}, 5},
		{"within the 10% tolerance nothing changes", cpuTarget(1, 10, 60), 3, Utilisation{CPU: ptr.To(0.65), VMs: 3}, 3},
		{"growth is capped at maxReplicas", cpuTarget(1, 4, 50), 3, Utilisation{CPU: ptr.To(1.0), VMs: 3}, 4},
		{"no usage figures: keep the size", cpuTarget(1, 10, 50), 3, Utilisation{}, 3},
		{"a pool at zero stays there", cpuTarget(1, 10, 50), 0, Utilisation{CPU: ptr.To(1.0), VMs: 1}, 0},
		{"below minReplicas comes up at once", cpuTarget(3, 10, 50), 1, Utilisation{CPU: ptr.To(0.1), VMs: 1}, 3},
		{"above maxReplicas comes down at once", cpuTarget(1, 5, 50), 8, Utilisation{CPU: ptr.To(0.5), VMs: 8}, 5},
		{"VMs without figures count as idle when growing", cpuTarget(1, 10, 60), 4, Utilisation{CPU: ptr.To(0.9), VMs: 2}, 4},
		{"the larger of CPU and memory wins", fleetv1.VMPoolAutoscaling{MinReplicas: ptr.To[int32](1), MaxReplicas: 10,
			TargetCPUUtilizationPercent: ptr.To[int32](50), TargetMemoryUtilizationPercent: ptr.To[int32](50)},
			3, Utilisation{CPU: ptr.To(0.5), Memory: ptr.To(1.0), VMs: 3}, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			d := Autoscale(tc.spec, nil, Observation{Now: t0, Current: tc.current, Usage: tc.usage})
			g.Expect(d.Desired).To(Equal(tc.expected))
			g.Expect(d.Status.DesiredReplicas).To(Equal(tc.expected))
			if tc.expected != tc.current {
				g.Expect(d.Status.LastScaleTime).NotTo(BeNil())
				g.Expect(d.Status.ScaleEvents).To(HaveLen(1))
			}
		})
	}
}

// TestAutoscaleScaleDownStabilisation: a dip in load does not shrink the pool until the highest
// recommendation of the last 300 seconds (the default window) is the lower one.
func TestAutoscaleScaleDownStabilisation(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakePassiveClock(t0)
	s := &scaler{spec: cpuTarget(1, 10, 60), clock: clk, current: 5}
	g.Expect(s.observe(0.6, 5)).To(Equal(int32(5)))
	clk.SetTime(t0.Add(15 * time.Second))
	g.Expect(s.observe(0.2, 5)).To(Equal(int32(5)), "the 300 s window still holds the recommendation of 5")
	clk.SetTime(t0.Add(290 * time.Second))
	g.Expect(s.observe(0.2, 5)).To(Equal(int32(5)))
	clk.SetTime(t0.Add(301 * time.Second))
	g.Expect(s.observe(0.2, 5)).To(Equal(int32(2)), "once the recommendation of 5 left the window, ceil(5 × 20/60) = 2")
	g.Expect(s.status.Recommendations).To(HaveLen(1), "equal consecutive recommendations are one record")
}

// TestAutoscaleScaleUpStabilisation: with a scale-up window, a spike must last the window before
// the pool grows.
func TestAutoscaleScaleUpStabilisation(t *testing.T) {
	g := NewWithT(t)
	clk := clocktesting.NewFakePassiveClock(t0)
	spec := cpuTarget(1, 10, 50)
	spec.Behavior = &fleetv1.VMPoolScalingBehavior{ScaleUp: &fleetv1.VMPoolScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)}}
	s := &scaler{spec: spec, clock: clk, current: 2}
	g.Expect(s.observe(0.5, 2)).To(Equal(int32(2)))
	clk.SetTime(t0.Add(10 * time.Second))
	g.Expect(s.observe(1.0, 2)).To(Equal(int32(2)), "the lowest recommendation of the last 60 s is 2")
	clk.SetTime(t0.Add(61 * time.Second))
	g.Expect(s.observe(1.0, 2)).To(Equal(int32(4)))
}

// TestAutoscaleStepPolicies: Pods and Percent policies limit the change per period, counted from
// the size at the start of the period; Min picks the smaller change; Disabled stops a direction.
func TestAutoscaleStepPolicies(t *testing.T) {
	t.Run("one VM per minute up", func(t *testing.T) {
		g := NewWithT(t)
		clk := clocktesting.NewFakePassiveClock(t0)
		spec := cpuTarget(1, 10, 50)
		spec.Behavior = &fleetv1.VMPoolScalingBehavior{ScaleUp: &fleetv1.VMPoolScalingRules{
			Policies: []fleetv1.VMPoolScalingPolicy{{Type: fleetv1.PodsScalingPolicy, Value: 1, PeriodSeconds: 60}}}}
		s := &scaler{spec: spec, clock: clk, current: 2}
		g.Expect(s.observe(1.0, 2)).To(Equal(int32(3)), "wants 4, one VM per minute")
		clk.SetTime(t0.Add(30 * time.Second))
		g.Expect(s.observe(1.0, 3)).To(Equal(int32(3)), "this minute's VM was added already")
		clk.SetTime(t0.Add(61 * time.Second))
		g.Expect(s.observe(1.0, 3)).To(Equal(int32(4)), "a new minute: wants ceil(3 × 2) = 6, one more than the 3 at its start")
	})
	t.Run("half per minute down, Percent", func(t *testing.T) {
		g := NewWithT(t)
		clk := clocktesting.NewFakePassiveClock(t0)
		spec := cpuTarget(1, 10, 50)
		spec.Behavior = &fleetv1.VMPoolScalingBehavior{ScaleDown: &fleetv1.VMPoolScalingRules{StabilizationWindowSeconds: ptr.To[int32](0),
			Policies: []fleetv1.VMPoolScalingPolicy{{Type: fleetv1.PercentScalingPolicy, Value: 50, PeriodSeconds: 60}}}}
		s := &scaler{spec: spec, clock: clk, current: 8}
		g.Expect(s.observe(0.1, 8)).To(Equal(int32(4)), "wants 2, half of 8 per minute")
		clk.SetTime(t0.Add(10 * time.Second))
		g.Expect(s.observe(0.1, 4)).To(Equal(int32(4)), "the period started at 8: no lower than 4")
		clk.SetTime(t0.Add(61 * time.Second))
		g.Expect(s.observe(0.2, 4)).To(Equal(int32(2)))
	})
	t.Run("Min picks the smaller step", func(t *testing.T) {
		g := NewWithT(t)
		spec := cpuTarget(1, 20, 50)
		spec.Behavior = &fleetv1.VMPoolScalingBehavior{ScaleUp: &fleetv1.VMPoolScalingRules{SelectPolicy: ptr.To(fleetv1.MinChangePolicySelect),
			Policies: []fleetv1.VMPoolScalingPolicy{{Type: fleetv1.PodsScalingPolicy, Value: 2, PeriodSeconds: 60}, {Type: fleetv1.PercentScalingPolicy, Value: 100, PeriodSeconds: 60}}}}
		d := Autoscale(spec, nil, Observation{Now: t0, Current: 4, Usage: Utilisation{CPU: ptr.To(1.0), VMs: 4}})
		g.Expect(d.Desired).To(Equal(int32(6)), "wants 8: Pods allows 6, Percent 8, Min takes 6")
	})
	t.Run("Disabled never scales down", func(t *testing.T) {
		g := NewWithT(t)
		spec := cpuTarget(1, 20, 50)
		spec.Behavior = &fleetv1.VMPoolScalingBehavior{ScaleDown: &fleetv1.VMPoolScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: ptr.To(fleetv1.DisabledPolicySelect)}}
		d := Autoscale(spec, nil, Observation{Now: t0, Current: 6, Usage: Utilisation{CPU: ptr.To(0.05), VMs: 6}})
		g.Expect(d.Desired).To(Equal(int32(6)))
	})
	t.Run("default scale-up: 4 VMs or 100% per 15 s, whichever is more", func(t *testing.T) {
		g := NewWithT(t)
		d := Autoscale(cpuTarget(1, 100, 10), nil, Observation{Now: t0, Current: 2, Usage: Utilisation{CPU: ptr.To(1.0), VMs: 2}})
		g.Expect(d.Desired).To(Equal(int32(6)), "wants 20: +4 beats +100%")
		d = Autoscale(cpuTarget(1, 100, 10), nil, Observation{Now: t0, Current: 10, Usage: Utilisation{CPU: ptr.To(1.0), VMs: 10}})
		g.Expect(d.Desired).To(Equal(int32(20)), "wants 100: +100% beats +4")
	})
}

// TestAutoscaleStaysWithinBounds: over any sequence of usages and times, a pool inside
// [minReplicas, maxReplicas] stays inside; growth stays within what the default step policies
// allow (at most max(4, 100%) over the size 15 s before); the history kept stays bounded.
func TestAutoscaleStaysWithinBounds(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		minR := rapid.Int32Range(1, 5).Draw(rt, "min")
		maxR := minR + rapid.Int32Range(0, 20).Draw(rt, "span")
		clk := clocktesting.NewFakePassiveClock(t0)
		s := &scaler{spec: cpuTarget(minR, maxR, rapid.Int32Range(10, 90).Draw(rt, "target")), clock: clk,
			current: rapid.Int32Range(minR, maxR).Draw(rt, "start")}
		type change struct {
			at    time.Time
			delta int32
		}
		var changes []change
		for i := range rapid.IntRange(1, 60).Draw(rt, "steps") {
			clk.SetTime(clk.Now().Add(time.Duration(rapid.IntRange(1, 120).Draw(rt, "dt")) * time.Second))
			before := s.current
			// The size at the start of the 15 s period: before, less the changes made within it.
			start := before
			for _, c := range changes {
				if c.at.After(clk.Now().Add(-15 * time.Second)) {
					start -= c.delta
				}
			}
			got := s.observe(rapid.Float64Range(0, 1.5).Draw(rt, "usage"), int(rapid.Int32Range(0, s.current).Draw(rt, "measured")))
			if got < minR || got > maxR {
				rt.Fatalf("step %d: %d outside [%d, %d]", i, got, minR, maxR)
			}
			if got > before && got-start > max(4, start) {
				rt.Fatalf("step %d: grew to %d within 15 s of being %d", i, got, start)
			}
			changes = append(changes, change{clk.Now(), got - before})
			if len(s.status.Recommendations) > maxHistory || len(s.status.ScaleEvents) > maxHistory {
				rt.Fatalf("history unbounded")
			}
		}
	})
}
