package gitlab

import (
	"context"
	"slices"
	"strings"

	gl "gitlab.com/gitlab-org/api/client-go"
)

// Access levels of a runner.
const (
	AccessNotProtected = "not_protected"
	AccessRefProtected = "ref_protected"
)

// RunnerSettings are what a pool's runners are created with, and so which jobs they take.
type RunnerSettings struct {
	// Tags of the runners; GitLab compares tags ignoring case.
	Tags []string
	// RunUntagged lets the runners take jobs without tags.
	RunUntagged bool
	// AccessLevel is not_protected (any ref; the default) or ref_protected (only jobs of
	// protected branches and tags).
	AccessLevel string
}

// RefProtectedOnly reports whether the runners take only jobs of protected refs.
func (s RunnerSettings) RefProtectedOnly() bool { return s.AccessLevel == AccessRefProtected }

// MatchesTags is GitLab's tag rule: a job with tags runs on a runner that has every one of
// them (ignoring case); a job without tags only on a runner with run_untagged.
func (s RunnerSettings) MatchesTags(jobTags []string) bool {
	if len(jobTags) == 0 {
		return s.RunUntagged
	}
	for _, t := range jobTags {
		if !slices.ContainsFunc(s.Tags, func(have string) bool { return strings.EqualFold(strings.TrimSpace(have), strings.TrimSpace(t)) }) {
			return false
		}
	}
	return true
}

// Matches reports whether the runners may take job: its tags match, and a ref_protected runner
// takes it only when its ref is protected (protected is what RefProtected says of the job's
// ref; GitLab's job API does not say).
func (s RunnerSettings) Matches(job Job, protected bool) bool {
	return s.MatchesTags(job.Tags) && (!s.RefProtectedOnly() || protected)
}

// RefProtected reports whether a ref of a project is protected: a protected branch, or with
// tag a protected tag, whose name or wildcard pattern ("release/*") matches it.
func (c *Client) RefProtected(ctx context.Context, project, ref string, tag bool) (bool, error) {
	var names []string
	if tag {
		opt := &gl.ListProtectedTagsOptions{ListOptions: gl.ListOptions{PerPage: 100}}
		for range maxPages {
			page, resp, err := c.gl.ProtectedTags.ListProtectedTags(project, opt, gl.WithContext(ctx))
			if err != nil {
				return false, classify("list protected tags of "+project, err)
			}
			for _, t := range page {
				names = append(names, t.Name)
			}
			if resp.NextPage == 0 {
				break
			}
			opt.Page = resp.NextPage
		}
	} else {
		opt := &gl.ListProtectedBranchesOptions{ListOptions: gl.ListOptions{PerPage: 100}}
		for range maxPages {
			page, resp, err := c.gl.ProtectedBranches.ListProtectedBranches(project, opt, gl.WithContext(ctx))
			if err != nil {
				return false, classify("list protected branches of "+project, err)
			}
			for _, b := range page {
				names = append(names, b.Name)
			}
			if resp.NextPage == 0 {
				break
			}
			opt.Page = resp.NextPage
		}
	}
	return slices.ContainsFunc(names, func(pattern string) bool { return WildcardMatch(pattern, ref) }), nil
}

// WildcardMatch is GitLab's protected-ref pattern match: * matches any run of characters,
// slashes included; anything else matches itself.
func WildcardMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}
