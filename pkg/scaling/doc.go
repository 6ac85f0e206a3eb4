// Package scaling decides how many runners a RunnerPool wants and which runners to create or
// remove: desired = busy + queued + idle floor, clamped to [min, max]; scale-down only ever removes
// runners without a job, in a fixed priority order; expired and unhealthy runners are replaced.
package scaling
