// Package platform is the seam between HyperFleet and a CI platform (GitHub Actions today;
// GitLab CI and Buildkite later). It speaks domain types only: webhooks become JobEvents, demand
// is a list of queued Jobs, and a runner is registered with a one-time config. A Source gives each
// RunnerPool its Platform; the controllers, the webhook receiver and the bootstrap service use
// one Source per process, instrumented once where the process is assembled, and decide on the
// platform-neutral errors of this package. A new platform is a new Source, not a change to any
// controller.
package platform
