// Package vmpool is the VMPool controller: it keeps a pool's persistent MachineClaims as many as
// spec.replicas, made from the current template, and replaces outdated ones as spec.strategy says.
// The plan (which VM to make, keep or delete next) is pure and lives in pkg/vmpool, which this
// package imports under the same name; this package reads the claims, acts on the plan and
// reports it. The MachineClaim controller makes and runs each claim's VM.
package vmpool
