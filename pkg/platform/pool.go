package platform

import (
	"strings"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
)

// KindOf returns the kind of CI platform pool's spec.platform names, "" if none.
func KindOf(pool *fleetv1.RunnerPool) Kind {
	p := pool.Spec.Platform
	switch {
	case p.GitHub != nil:
		return KindGitHub
	case p.GitLab != nil:
		return KindGitLab
	case p.Buildkite != nil:
		return KindBuildkite
	}
	return ""
}

// Pool is a RunnerPool's platform settings in neutral terms, for routing jobs to pools without
// credentials: its kind, scope and what its runners register with.
type Pool struct {
	Kind Kind
	// Scope is the pool's effective scope.
	Scope Scope
	// Labels are what the runners register with: GitHub labels (self-hosted implied), GitLab
	// tags, Buildkite agent tags as key=value with queue=<queue> always among them.
	Labels []string
	// RunUntagged lets a GitLab pool take jobs without tags.
	RunUntagged bool
	// URLs are the API endpoints the pool's credentials (or its VMs' tokens) are sent to, as
	// set in the spec (empty: the platform's https:// default).
	URLs []string
	// AllowInsecureHTTP is the spec's allowInsecureHTTP.
	AllowInsecureHTTP bool
}

// PlainHTTPURL returns the first of the pool's URLs that is http://, if any.
func (p Pool) PlainHTTPURL() (string, bool) {
	for _, u := range p.URLs {
		if IsPlainHTTP(u) {
			return u, true
		}
	}
	return "", false
}

// DefaultBuildkiteQueue is the queue of a Buildkite pool or job that names none.
const DefaultBuildkiteQueue = "default"

// PoolOf returns pool's neutral settings; ok is false when spec.platform names no platform.
func PoolOf(pool *fleetv1.RunnerPool) (p Pool, ok bool) {
	spec := pool.Spec.Platform
	switch {
	case spec.GitHub != nil:
		gh := spec.GitHub
		return Pool{Kind: KindGitHub, Scope: Scope{Organization: gh.Organization, Repository: gh.Repository}.Effective(),
			Labels: NormalizeLabels(gh.Labels), URLs: nonEmpty(gh.APIURL), AllowInsecureHTTP: gh.AllowInsecureHTTP}, true
	case spec.GitLab != nil:
		gl := spec.GitLab
		return Pool{Kind: KindGitLab, Scope: Scope{Instance: gl.Scope.Instance, Organization: gl.Scope.Group, Repository: gl.Scope.Project}.Effective(),
			Labels: NormalizeLabels(gl.Tags), RunUntagged: gl.RunUntagged, URLs: nonEmpty(gl.URL), AllowInsecureHTTP: gl.AllowInsecureHTTP}, true
	case spec.Buildkite != nil:
		bk := spec.Buildkite
		queue := bk.Queue
		if queue == "" {
			queue = DefaultBuildkiteQueue
		}
		labels := []string{"queue=" + queue}
		for _, t := range bk.Tags {
			if k, _, _ := strings.Cut(t, "="); !strings.EqualFold(k, "queue") {
				labels = append(labels, t)
			}
		}
		return Pool{Kind: KindBuildkite, Scope: Scope{Organization: bk.Organization}, Labels: NormalizeLabels(labels),
			URLs: nonEmpty(bk.APIURL, bk.AgentEndpoint), AllowInsecureHTTP: bk.AllowInsecureHTTP}, true
	}
	return Pool{}, false
}

func nonEmpty(urls ...string) []string {
	var out []string
	for _, u := range urls {
		if u != "" {
			out = append(out, u)
		}
	}
	return out
}

// Serves reports whether a runner of the pool may take a job with these labels, by the pool's
// platform's rule:
//   - GitHub: the runner has every runs-on label (self-hosted implied); a job without labels
//     is not for HyperFleet.
//   - GitLab: the runner has every tag of the job; a job without tags only if RunUntagged.
//   - Buildkite: every agent query rule key=value of the job matches the agent's tag of that key
//     (value "*" matches any value, a trailing "*" a prefix); the queue rule defaults to
//     queue=default.
func (p Pool) Serves(jobLabels []string) bool {
	switch p.Kind {
	case KindGitHub:
		return MatchesLabels(jobLabels, p.Labels)
	case KindGitLab:
		job := NormalizeLabels(jobLabels)
		if len(job) == 0 {
			return p.RunUntagged
		}
		return isSubset(job, p.Labels)
	case KindBuildkite:
		return matchesAgentRules(jobLabels, p.Labels)
	}
	return false
}

// ExtraLabels counts the pool's labels the job does not ask for, to prefer the plainest pool.
func (p Pool) ExtraLabels(jobLabels []string) int {
	job := NormalizeLabels(jobLabels)
	n := 0
	for _, l := range p.Labels {
		if !containsSorted(job, l) && l != SelfHostedLabel && !strings.HasPrefix(l, "queue=") {
			n++
		}
	}
	return n
}

func isSubset(sub, sortedSet []string) bool {
	for _, l := range sub {
		if !containsSorted(sortedSet, l) {
			return false
		}
	}
	return true
}

func containsSorted(sorted []string, l string) bool {
	for _, s := range sorted {
		if s == l {
			return true
		}
	}
	return false
}

// matchesAgentRules is Buildkite's agent query rule match.
func matchesAgentRules(rules, agentTags []string) bool {
	tags := map[string]string{}
	for _, t := range NormalizeLabels(agentTags) {
		k, v, _ := strings.Cut(t, "=")
		tags[k] = v
	}
	sawQueue := false
	for _, r := range NormalizeLabels(rules) {
		k, want, ok := strings.Cut(r, "=")
		if !ok {
			return false
		}
		if k == "queue" {
			sawQueue = true
		}
		have, ok := tags[k]
		if !ok {
			return false
		}
		switch {
		case want == "*":
		case strings.HasSuffix(want, "*"):
			if !strings.HasPrefix(have, strings.TrimSuffix(want, "*")) {
				return false
			}
		case have != want:
			return false
		}
	}
	return sawQueue || tags["queue"] == DefaultBuildkiteQueue
}
