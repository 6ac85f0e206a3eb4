// Package fleetcontrolplane is the FleetControlPlane controller: the minimal control plane of a
// runner fleet's Cluster. It reports the control plane initialized and writes the Cluster's
// kubeconfig Secret with a read-only token, so that Cluster API's MachineHealthCheck can judge
// runners. Its test runs the real Cluster API manager's MachineHealthCheck against stuck runners.
package fleetcontrolplane
