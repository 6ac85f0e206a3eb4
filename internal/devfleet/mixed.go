package devfleet

import (
	"fmt"
	"slices"
	"strings"
)

// PlatformAll is Options.Platform for a mixed fleet: one pool of every CI platform on the one
// hypervisor, the same as "github,gitlab,buildkite".
const PlatformAll = "all"

// Platforms lists every CI platform the local fleet can run a pool of, in the order a mixed
// fleet's pools are created.
var Platforms = []string{PlatformGitHub, PlatformGitLab, PlatformBuildkite}

// PoolState is one pool of a mixed fleet and the runner package its VMs download.
type PoolState struct {
	Platform string   `json:"platform"`
	Name     string   `json:"name"`
	Labels   []string `json:"labels"`
	// Queue is a Buildkite pool's queue.
	Queue  string      `json:"queue,omitempty"`
	Runner RunnerState `json:"runnerPackage"`
}

// parsePlatforms reads Options.Platform: one platform, a comma-separated list of distinct
// platforms, or PlatformAll; empty is GitHub.
func parsePlatforms(s string) ([]string, error) {
	if s == "" {
		return []string{PlatformGitHub}, nil
	}
	if s == PlatformAll {
		return slices.Clone(Platforms), nil
	}
	var out []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if !slices.Contains(Platforms, p) {
			return nil, fmt.Errorf("platform %q: want %s, a comma-separated list of them, or %s", p, strings.Join(Platforms, ", "), PlatformAll)
		}
		if slices.Contains(out, p) {
			return nil, fmt.Errorf("platform %q is listed twice", p)
		}
		out = append(out, p)
	}
	// The order of Platforms, whatever order they were given in.
	slices.SortFunc(out, func(a, b string) int { return slices.Index(Platforms, a) - slices.Index(Platforms, b) })
	return out, nil
}

// mixed says whether the fleet runs pools of more than one platform.
func (o *Options) mixed() bool { return len(o.platforms) > 1 }

// poolFor is the pool of platform: the sample pool itself in a fleet of one platform; in a
// mixed fleet the sample pool's shape under a name of the platform's own, with a Buildkite
// pool's queue and key=value agent tags.
func (o *Options) poolFor(platform string) PoolOptions {
	p := o.Pool
	p.Labels = slices.Clone(p.Labels)
	if !o.mixed() {
		return p
	}
	p.Name = platform + "-" + p.Name
	if platform == PlatformBuildkite {
		p.buildkiteDefaults()
	} else if strings.Contains(strings.Join(p.Labels, ","), "=") {
		// key=value tags given for Buildkite are no GitHub labels or GitLab tags.
		p.Labels = slices.Clone(DefaultLabels)
	}
	return p
}

// PoolOf is the pool of platform in s: the fleet's only pool, or the mixed fleet's pool of it.
func (s *State) PoolOf(platform string) (PoolState, bool) {
	for _, p := range s.Pools {
		if p.Platform == platform {
			return p, true
		}
	}
	if len(s.Pools) == 0 && s.Platform == platform {
		return PoolState{Platform: platform, Name: s.Pool, Runner: s.Runner}, true
	}
	return PoolState{}, false
}

// jobPlatform is where a JobRequest's jobs go: its Platform, else the fleet's only platform,
// else (a mixed fleet) GitHub.
func jobPlatform(s *State, requested string) string {
	if requested != "" {
		return requested
	}
	if len(s.Pools) == 0 && s.Platform != "" {
		return s.Platform
	}
	return PlatformGitHub
}
