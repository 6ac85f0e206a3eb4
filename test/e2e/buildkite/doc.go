// Package buildkite runs the local fleet with a Buildkite pool (the fake Buildkite, a
// buildkite-agent stand-in in each VM) and checks the whole loop: signed job.scheduled webhooks
// scale the pool, every job runs once on its own VM with its own agent token, a held job boots
// nothing, and the pool returns to its floor with only the floor VM's token left.
package buildkite
