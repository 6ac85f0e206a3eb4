// Package tenancy names the one way HyperFleet's access to a namespace fails: the namespace has not
// been enabled for HyperFleet. The manager and the bootstrap service may read and write Secrets only
// in namespaces where an admin bound their tenant ClusterRoles (docs/install.md), so a forbidden
// Secret request becomes a condition an admin can act on rather than a retry loop.
package tenancy
