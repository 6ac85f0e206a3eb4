// Package history is HyperFleet's durable record of every job a runner VM ran and of every action
// taken on HyperFleet's objects, kept after the VMs are gone. It stores and queries; it neither
// signs (pkg/provenance seals a finished record with a DSSE envelope, opaque here) nor decides who
// may read what (callers pass the namespaces a reader may see). SQLite is the embedded default and
// PostgreSQL the shared one; both pass the same conformance suite.
package history
