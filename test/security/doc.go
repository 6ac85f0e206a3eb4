// Package security plays the attackers of HyperFleet's tenancy model against a real API server with
// RBAC on: users with `edit` in one namespace, and the manager and bootstrap service running with
// exactly the permissions the installation ships (their ServiceAccounts' tokens). Each test proves a
// boundary by a request that fails (403) or by a refusal the object reports, never by reading RBAC
// rules alone.
package security
