package v1alpha1

// WarmAnnotation marks the MachineClaim of a RunnerPool's warm runner: its VM is cloned and
// configured but not started until the pool needs it. Its values move forward only:
//   - WarmHeld (set by the pool at creation): clone and configure, without bootstrap data, then
//     stop there. A stopped, never-booted VM is the claim's resting state: the sweep never takes it
//     for a runner that finished.
//   - WarmStart (set by the pool when a job needs the runner): deliver the bootstrap data (whose
//     join token is minted only now) and start the VM.
//   - WarmStarted (set by the claim once the data is on the VM): provisioning continues as for any
//     runner. The mark stays, so the runner's job is counted on the warm path.
const WarmAnnotation = "infrastructure.cluster.x-k8s.io/warm"

// Values of WarmAnnotation.
const (
	WarmHeld    = "Held"
	WarmStart   = "Start"
	WarmStarted = "Started"
)

// WarmStartTimeAnnotation is when the pool started a warm runner (RFC 3339): its bootstrap
// timeout and lifetime count from then, not from its clone.
const WarmStartTimeAnnotation = "infrastructure.cluster.x-k8s.io/warm-start-time"

// WarmHeldReason (VMProvisioned False): the claim's VM is cloned, configured and stopped, a warm
// VM waiting for its pool to start it.
const WarmHeldReason = "WarmHeld"

// IsWarmHeld tells whether a claim's VM is a warm VM not yet asked to start.
func IsWarmHeld(annotations map[string]string) bool {
	return annotations[WarmAnnotation] == WarmHeld
}

// WarmAwaitsData tells whether a configured warm VM has been asked to start and still needs its
// bootstrap data.
func WarmAwaitsData(c *MachineClaim) bool {
	return c.Status.CompletedStep == StepConfigured && c.Annotations[WarmAnnotation] == WarmStart
}

// IsWarm tells whether a claim belongs to a warm runner, held or started.
func IsWarm(annotations map[string]string) bool {
	switch annotations[WarmAnnotation] {
	case WarmHeld, WarmStart, WarmStarted:
		return true
	}
	return false
}
