// Package runnerpool is the RunnerPool controller: it sizes a pool of one-job runners from its job
// ledger (pkg/demand, fed by webhooks and by PolledDemand's polls of the platform's API), creates
// runners as Cluster API Machines with their MachineClaims and BootstrapConfigs, retires and
// deregisters them, spreads them over the pool's targets, keeps its warm tier, and repairs the
// ledger from the platform's API. Sizing is pkg/scaling's; events of a pool's many children are
// coalesced into one reconcile (coalesce.go).
package runnerpool
