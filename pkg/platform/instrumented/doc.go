// Package instrumented decorates a platform.Platform with OpenTelemetry spans and publishes the
// GitHub rate-limit gauge after every API call, so the CI platform client is traced and watched
// without changes to it or to its callers.
package instrumented
