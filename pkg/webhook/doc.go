// Package webhook receives the CI platforms' job webhooks for HyperFleet, one route per platform
// (/webhooks/github, /webhooks/gitlab, /webhooks/buildkite), each verified with its own secret by
// the parser its platform registered with pkg/platform. The HTTP handler only verifies, parses and
// queues, so the platform gets its answer in milliseconds; worker goroutines route each job to
// exactly one RunnerPool of the delivery's platform, record it in that pool's job ledger
// (pkg/demand) and wake the pool's controller. Memory holds only a queue and a cache of recent
// delivery ids: the ledger's forward-only rule is what makes deliveries idempotent across
// replicas, and the repair loop recovers whatever a crash or a full queue drops.
package webhook
