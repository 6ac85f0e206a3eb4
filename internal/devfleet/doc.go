// Package devfleet runs a whole HyperFleet fleet on one machine: a local API server with Cluster
// API's and HyperFleet's CRDs, the real Cluster API core manager, HyperFleet's manager, the
// bootstrap service, the Proxmox VE simulator booting VMs by running the real agent, and the fake
// GitHub API sending signed webhooks. `hyperfleet-dev up` (make dev) and the end-to-end tests start
// the same fleet through Start, so what a person watches is what CI checks. It sits under
// internal/, not pkg/: it is development and test code, and no shipped binary links it.
package devfleet
