package scaling

import (
	"time"
)

// Policy is a pool's sizing rules.
type Policy struct {
	Min, Max, Idle int
	// Replicas, when set (by a person, HPA or KEDA through /scale), replaces demand-based sizing.
	Replicas *int
	// IdleTTL replaces a ready runner that waited this long without a job; 0 disables.
	IdleTTL time.Duration
	// MaxLifetime replaces any runner older than this; 0 disables.
	MaxLifetime time.Duration
	// BootstrapTimeout removes a runner that is not ready this long after creation; 0 disables.
	BootstrapTimeout time.Duration
	// Warm is how many warm runners (cloned, configured, stopped VMs) are kept within Max.
	Warm int
	// WarmMaxAge replaces a warm runner not started this long after creation; 0 disables.
	WarmMaxAge time.Duration
}

// Demand is what the pool's jobs need.
type Demand struct {
	// Queued jobs wait for a runner of this pool.
	Queued int
	// Busy runners are running a job.
	Busy int
}

// Runner is the state of one runner (one Machine).
type Runner struct {
	Name    string
	Created time.Time
	// Ready runners have bootstrapped and wait for, or run, a job.
	Ready bool
	// ReadySince is when the runner became ready; its idle time starts there.
	ReadySince time.Time
	// Busy runners run a job and are never removed by scale-down.
	Busy bool
	// Deleting runners are going away: they count toward Max until they are gone (their VM may
	// still run, and a destroy can fail for a long time), but not toward the desired size.
	Deleting bool
	// Unhealthy runners were marked for remediation (MachineHealthCheck) and are replaced.
	Unhealthy bool
	// VMStopped runners were marked by the sweep, which saw their VM stopped or gone (a sighting
	// that may be wrong). They are replaced by the rule that never kills a job: one that is Busy
	// is removed only once the CI platform says it is not.
	VMStopped bool
	// HostMaintenance runners have their VM on a host in maintenance: one without a job is
	// replaced (its replacement goes to another host); a Busy one finishes its job first.
	HostMaintenance bool
	// Done runners ran their one job to completion (the job ledger says so) and take no other:
	// they are removed at once, and count toward Max until they are gone but not toward the
	// desired size. Counted as idle, a finished runner would let scale-down remove a runner still
	// booting for a queued job, or keep the pool from cloning one, until the sweep saw its VM off.
	Done bool
	// Queued runners wait in their hypervisor's queue (for a clone slot or for capacity): the
	// bootstrap timeout does not run while they wait, or a burst larger than the hypervisors clone
	// in that time would replace its own tail, sending it to the back of the queue for ever.
	Queued bool
	// BootingSince, when set, is when the runner's VM began to be made (its clone accepted); the
	// bootstrap timeout counts from it. Zero counts from Created.
	BootingSince time.Time
	// Warm runners are warm VMs not started yet: they count toward Max, not toward the desired
	// size, and a job that finds no idle runner starts one instead of a clone (Plan.Start).
	Warm bool
}

// Reason says why a runner is removed.
type Reason string

const (
	ReasonUnhealthy        Reason = "Unhealthy"
	ReasonMaxLifetime      Reason = "MaxLifetimeExceeded"
	ReasonIdleTTL          Reason = "IdleTTLExceeded"
	ReasonBootstrapTimeout Reason = "BootstrapTimeout"
	ReasonScaleDown        Reason = "ScaleDown"
	ReasonWarmMaxAge       Reason = "WarmMaxAgeExceeded"
	ReasonHostMaintenance  Reason = "HostMaintenance"
	ReasonJobDone          Reason = "JobDone"
)

// Removal is one runner to remove and why.
type Removal struct {
	Name   string
	Reason Reason
	// Held is set for a Busy, VMStopped runner: it stays while the CI platform says its job runs,
	// and until then it holds its place. The plan counts it toward the desired size (its job is
	// part of Demand.Busy) and toward Max, so no replacement is planned beside it; the
	// replacement comes once it is gone.
	Held bool
}

// Plan is what to do now.
type Plan struct {
	Desired int
	// Limited is true when demand exceeds Max, or runners still being deleted hold places the
	// pool would otherwise fill.
	Limited bool
	Create  int
	Remove  []Removal
	// Start are warm runners to start, oldest first: they serve demand before any clone.
	Start []string
	// CreateWarm is how many warm runners to create to refill the warm tier.
	CreateWarm int
	// WarmTarget is the size of the warm tier Policy.Warm comes to within Max beside Desired.
	WarmTarget int
	// Recheck is when the first of the kept runners' timeouts (lifetime, bootstrap, idle) falls
	// due, so the pool looks again then rather than at its next event; zero when none is armed.
	Recheck time.Duration
	// need is how many runners the desired size lacks, room how many Max leaves.
	need, room int
}

// CreateIfKept is Create when kept of the removals that are not Held stayed after all (the CI
// platform said the runner runs a job, or it was being registered): each holds a place, so the
// desired size needs one runner fewer. Max already counts them, as every runner that exists.
func (p Plan) CreateIfKept(kept int) int {
	return max(0, min(p.need-kept, p.room))
}

// DesiredReplicas is busy + queued + idle floor (or the explicit replicas), clamped to [Min, Max].
func DesiredReplicas(p Policy, d Demand) (desired int, limited bool) {
	want := d.Busy + d.Queued + p.Idle
	if p.Replicas != nil {
		want = *p.Replicas
	}
	limited = want > p.Max
	return max(p.Min, min(p.Max, want)), limited
}

// Decide plans creations and removals. Runners that must be replaced (unhealthy, past their
// lifetime, idle too long, never bootstrapped) are removed first and no longer count toward the
// desired size, except a held one (a busy runner the sweep marked, see Removal.Held), which holds
// its place until it is gone; then the pool grows to the desired size or shrinks by removing
// runners without a job, in RemovalOrder. Growth stops at Max counting every runner that still
// exists, deleting and held ones included.
func Decide(p Policy, d Demand, runners []Runner, now time.Time) Plan {
	desired, limited := DesiredReplicas(p, d)
	plan := Plan{Desired: desired, Limited: limited}
	var keep, warm []Runner
	for _, r := range runners {
		if r.Deleting {
			continue
		}
		if r.Warm {
			if reason, ok := mustReplaceWarm(p, r, now); ok {
				plan.Remove = append(plan.Remove, Removal{Name: r.Name, Reason: reason})
				continue
			}
			if due := nextWarmTimeout(p, r, now); due > 0 && (plan.Recheck == 0 || due < plan.Recheck) {
				plan.Recheck = due
			}
			warm = append(warm, r)
			continue
		}
		if r.Done && !r.Busy {
			plan.Remove = append(plan.Remove, Removal{Name: r.Name, Reason: ReasonJobDone})
			continue
		}
		if reason, ok := mustReplace(p, r, now); ok {
			held := r.Busy && r.VMStopped
			plan.Remove = append(plan.Remove, Removal{Name: r.Name, Reason: reason, Held: held})
			if held {
				keep = append(keep, r) // counted; never scaled down (busy)
			}
			continue
		}
		if due := nextTimeout(p, r, now); due > 0 && (plan.Recheck == 0 || due < plan.Recheck) {
			plan.Recheck = due
		}
		keep = append(keep, r)
	}
	// Every Machine counts toward Max until it is gone, those being deleted and those this plan
	// removes included: a pool whose deletions fail must not grow past its maximum.
	room := max(0, p.Max-len(runners))
	switch n := len(keep); {
	case n < desired:
		// Warm runners serve demand first: starting one pays the boot only.
		need := desired - n
		warm = sortOldestFirst(warm)
		for _, r := range warm[:min(need, len(warm))] {
			plan.Start = append(plan.Start, r.Name)
		}
		warm = warm[len(plan.Start):]
		need -= len(plan.Start)
		plan.need, plan.room = need, room
		plan.Create = min(need, room)
		if plan.Create < need {
			plan.Limited = true
		}
	case n > desired:
		for _, r := range RemovalOrder(keep)[:min(n-desired, idleCount(keep))] {
			plan.Remove = append(plan.Remove, Removal{Name: r.Name, Reason: ReasonScaleDown})
		}
	}
	planWarm(p, &plan, warm, desired, room-plan.Create)
	return plan
}

func mustReplace(p Policy, r Runner, now time.Time) (Reason, bool) {
	switch {
	case r.Unhealthy:
		return ReasonUnhealthy, true
	case p.MaxLifetime > 0 && now.Sub(r.Created) > p.MaxLifetime:
		return ReasonMaxLifetime, true
	case r.Busy:
		return "", false
	case r.HostMaintenance:
		return ReasonHostMaintenance, true
	case !r.Ready && !r.Queued && p.BootstrapTimeout > 0 && now.Sub(r.bootingSince()) > p.BootstrapTimeout:
		return ReasonBootstrapTimeout, true
	case r.Ready && p.IdleTTL > 0 && !r.ReadySince.IsZero() && now.Sub(r.ReadySince) > p.IdleTTL:
		return ReasonIdleTTL, true
	}
	return "", false
}

// bootingSince is when r's bootstrap timeout starts.
func (r Runner) bootingSince() time.Time {
	if !r.BootingSince.IsZero() {
		return r.BootingSince
	}
	return r.Created
}

// nextTimeout is how long until one of r's timeouts would replace it (as mustReplace judges), or
// zero when none applies.
func nextTimeout(p Policy, r Runner, now time.Time) time.Duration {
	var due time.Duration
	arm := func(limit time.Duration, since time.Time) {
		if limit <= 0 || since.IsZero() {
			return
		}
		// Just past the limit: mustReplace needs now - since > limit.
		if d := since.Add(limit).Sub(now) + time.Millisecond; d > 0 && (due == 0 || d < due) {
			due = d
		}
	}
	arm(p.MaxLifetime, r.Created)
	switch {
	case r.Busy:
	case r.Queued:
	case !r.Ready:
		arm(p.BootstrapTimeout, r.bootingSince())
	default:
		arm(p.IdleTTL, r.ReadySince)
	}
	return due
}

func idleCount(rs []Runner) int {
	n := 0
	for _, r := range rs {
		if !r.Busy {
			n++
		}
	}
	return n
}
