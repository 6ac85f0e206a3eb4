// Package e2e tests HyperFleet end to end on the same local fleet `make dev` starts
// (internal/devfleet): real Cluster API controllers, HyperFleet's manager and bootstrap service,
// VMs that boot the real agent in the Proxmox VE simulator, and jobs queued on the fake GitHub API
// that reach HyperFleet as signed webhooks.
package e2e
