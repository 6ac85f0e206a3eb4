// Package mixedplatforms is the end-to-end test of a mixed local fleet: a GitHub, a GitLab and a
// Buildkite pool on one hypervisor, each platform's jobs queued at once, each run on a VM of its
// own platform's pool, and every pool back at its floor afterwards.
package mixedplatforms
