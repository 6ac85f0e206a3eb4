package platform

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// SelfHostedLabel is the label every self-hosted GitHub runner carries. A JIT-registered runner
// gets only the labels it is registered with, so HyperFleet always registers its runners with
// self-hosted; matching therefore treats it as present on every HyperFleet runner, and pools
// need not list it.
const SelfHostedLabel = "self-hosted"

// NormalizeLabels lower-cases and trims labels, drops empty ones and duplicates, and sorts.
func NormalizeLabels(labels []string) []string {
	out := make([]string, 0, len(labels))
	for _, l := range labels {
		if l = strings.ToLower(strings.TrimSpace(l)); l != "" {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// LabelSetKey is a canonical string for a label set, for counting demand per set: the same
// labels in any case or order give the same key. self-hosted is left out since every
// HyperFleet runner has it.
func LabelSetKey(labels []string) string {
	norm := NormalizeLabels(labels)
	norm = slices.DeleteFunc(norm, func(l string) bool { return l == SelfHostedLabel })
	return strings.Join(norm, ",")
}

// MatchesLabels reports whether a runner with runnerLabels may run a job with jobLabels: the
// runner must have every one of the job's runs-on labels, ignoring case (GitHub's rule).
// self-hosted is implied on the runner side (see SelfHostedLabel). A job without labels
// matches nothing: it cannot be meant for a HyperFleet runner.
func MatchesLabels(jobLabels, runnerLabels []string) bool {
	job := NormalizeLabels(jobLabels)
	if len(job) == 0 {
		return false
	}
	have := NormalizeLabels(append(slices.Clone(runnerLabels), SelfHostedLabel))
	for _, l := range job {
		if _, found := slices.BinarySearch(have, l); !found {
			return false
		}
	}
	return true
}

// FilterJobs returns the jobs a runner with runnerLabels could run.
func FilterJobs(jobs []Job, runnerLabels []string) []Job {
	var out []Job
	for _, j := range jobs {
		if MatchesLabels(j.Labels, runnerLabels) {
			out = append(out, j)
		}
	}
	return out
}

// poolLabelPrefix starts the label that marks a runner as registered by one pool.
const poolLabelPrefix = "hyperfleet-pool-"

// PoolRunnerLabel is the label every runner of the pool with this UID is registered with. The
// repair loop deregisters only offline runners that carry it: runner names are no identity, since
// pool "linux"'s prefix "linux-" also starts every runner name of pool "linux-gpu", and pools of
// two namespaces may share a name. The UID is hashed to a short, fixed-length, lower-case label.
func PoolRunnerLabel(poolUID string) string {
	sum := sha256.Sum256([]byte(poolUID))
	return poolLabelPrefix + hex.EncodeToString(sum[:8])
}

// HasLabel reports whether labels contain label, ignoring case as GitHub does.
func HasLabel(labels []string, label string) bool {
	return slices.ContainsFunc(labels, func(l string) bool { return strings.EqualFold(strings.TrimSpace(l), label) })
}
