// Package vmpool holds the VMPool's policies as pure functions: which MachineClaims a rolling
// update or Recreate creates and deletes (within maxSurge and maxUnavailable), the order VMs are
// removed in, the template hash, and the autoscaler's HorizontalPodAutoscaler-style decision with
// its stabilisation windows and step policies. The controller feeds them the observed claims and
// applies what they return.
package vmpool
