package v1alpha1

import "time"

// DefaultWarmMaxAge is spec.warmMaxAge when unset.
const DefaultWarmMaxAge = 8 * time.Hour

// WarmMaxAgeReason: a warm VM was not started within spec.warmMaxAge and is replaced.
const WarmMaxAgeReason = "WarmMaxAgeExceeded"
