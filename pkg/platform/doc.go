// Package platform is the seam between HyperFleet's controllers and a CI platform (GitHub
// Actions today; GitLab CI and Buildkite later). It speaks domain types only: webhooks become
// JobEvents, demand is a list of queued Jobs, and a runner is registered with a one-time config,
// so a new platform is a new implementation of Platform, not a change to any controller.
package platform
