// Package webhook receives GitHub's workflow_job webhooks for HyperFleet. The HTTP handler only
// verifies, parses and queues, so GitHub gets its answer in milliseconds; worker goroutines route
// each job to exactly one RunnerPool, record it in that pool's job ledger (pkg/demand) and wake
// the pool's controller. Memory holds only a queue and a cache of recent delivery ids: the
// ledger's forward-only rule is what makes deliveries idempotent across replicas, and the repair
// loop recovers whatever a crash or a full queue drops.
package webhook
