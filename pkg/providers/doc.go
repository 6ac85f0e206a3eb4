// Package providers links HyperFleet's hypervisor providers into the processes that connect to
// hypervisors. It is the one place that names every provider package: pkg/connection and the
// controllers only see the provider-neutral interface.
package providers
