// Package buildkite is HyperFleet's Buildkite platform: it verifies Buildkite job webhooks (token
// or timestamped signature), maps Buildkite job states onto the ledger's, matches jobs to pools by
// queue and agent tags, registers each VM with its own cluster agent token (deleted when the VM
// goes), and repairs missed webhooks from the builds API. It talks to Buildkite through
// github.com/buildkite/go-buildkite/v4, with 429s turned into classified errors instead of retries.
package buildkite
