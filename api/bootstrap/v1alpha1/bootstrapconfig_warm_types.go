package v1alpha1

// WarmHoldAnnotation, set by a RunnerPool on the BootstrapConfig of a warm runner, holds the
// config back: no join token is minted and no data Secret is written while it is there. The warm
// VM is cloned and configured without bootstrap data and may stay stopped for the pool's
// warmMaxAge; the pool removes the annotation when it starts the VM, so the token is minted then,
// with the config's usual TTL, and is never valid for the time the VM sat stopped.
const WarmHoldAnnotation = "bootstrap.cluster.x-k8s.io/warm-hold"

// WarmHeldReason (DataSecretAvailable False): the config is held for a warm VM not started yet.
const WarmHeldReason = "WarmHeld"
