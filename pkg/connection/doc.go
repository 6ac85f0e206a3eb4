// Package connection turns a HypervisorCluster and the Secrets it references into a connected
// hypervisor.Provider, through the builder registered for its spec.provider (Providers lists them).
// It keeps one client per credential set and rebuilds it when a Secret rotates, and it classifies
// what went wrong so controllers can set a condition with a precise reason.
package connection
