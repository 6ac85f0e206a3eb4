// Package platform is the seam between HyperFleet and the CI platforms (GitHub Actions, GitLab CI,
// Buildkite). It speaks domain types only: webhooks become JobEvents with string IDs, demand is a
// list of queued Jobs (held jobs are not demand), and a runner is registered with a one-time config
// (Registration). Each platform package registers a Driver (pkg/platform/all lists them);
// NewSource builds the Source that dispatches each RunnerPool to its platform by spec.platform.
// The controllers, the webhook receiver and the bootstrap service use one Source per process,
// instrumented once where the process is assembled, and decide on the platform-neutral errors of
// this package. A new platform is a new package and a line in pkg/platform/all, not a change to
// any controller.
package platform
