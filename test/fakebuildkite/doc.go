// Package fakebuildkite is a stateful, in-process fake of the parts of Buildkite that HyperFleet
// uses: the REST API v2 (cluster agent tokens, agents, builds and their jobs) with scoped API
// tokens, pagination and rate limits; the agent API v3 (register, ping, accept, start, finish,
// disconnect, and the metrics endpoint); and job webhooks sent with a token or a signature as
// Buildkite sends them. It speaks the real wire format, so the unmodified go-buildkite client and
// a buildkite-agent-like program work against it.
package fakebuildkite
