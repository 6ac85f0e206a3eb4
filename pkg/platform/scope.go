package platform

import (
	"errors"
	"fmt"
	"strings"
)

// Scope is where runners register and jobs are looked for: one repository, a whole organization
// (or group), or a whole instance. The narrowest field set wins (Effective): a repository over an
// organization over the instance, because repository-level configuration takes precedence on
// every platform and a repository runner is the narrower grant; the wider fields then only
// document where the repository lives.
//
//   - GitHub: Organization is the organization, Repository "owner/name"; Instance is not used.
//   - GitLab: Organization is a group's full path ("group" or "group/sub"), Repository a project's
//     full path ("group/sub/project"), Instance the instance runners of the whole GitLab.
//   - Buildkite: Organization is the organization slug; runners serve its whole cluster queue.
type Scope struct {
	Organization string
	Repository   string
	Instance     bool
}

// IsRepository reports whether the scope is a single repository (GitLab: project).
func (s Scope) IsRepository() bool { return s.Repository != "" }

// IsInstance reports whether the scope is a whole instance (GitLab instance runners).
func (s Scope) IsInstance() bool { return !s.IsRepository() && s.Organization == "" && s.Instance }

// Owner is the account the scope belongs to: the organization, or the repository's first path
// segment; empty for an instance scope.
func (s Scope) Owner() string {
	if s.IsRepository() {
		owner, _, _ := strings.Cut(s.Repository, "/")
		return owner
	}
	return s.Organization
}

// RepositoryParts splits Repository at its last slash into namespace and name ("owner" and
// "name" on GitHub; "group/sub" and "project" on GitLab).
func (s Scope) RepositoryParts() (owner, name string) {
	i := strings.LastIndex(s.Repository, "/")
	if i < 0 {
		return s.Repository, ""
	}
	return s.Repository[:i], s.Repository[i+1:]
}

// Effective returns the scope with only the field that applies set.
func (s Scope) Effective() Scope {
	switch {
	case s.IsRepository():
		return Scope{Repository: s.Repository}
	case s.Organization != "":
		return Scope{Organization: s.Organization}
	default:
		return Scope{Instance: s.Instance}
	}
}

// Validate checks that the scope names a repository path ("owner/name", or "group/sub/project"),
// an organization or group path, or the instance. Platform-specific rules (GitHub's single
// slash) are the API's CEL and the platform package's business.
func (s Scope) Validate() error {
	switch {
	case s.IsRepository():
		if !validPath(s.Repository, 2) {
			return fmt.Errorf("repository %q is not owner/name (or group/project)", s.Repository)
		}
	case s.Organization != "":
		if !validPath(s.Organization, 1) {
			return fmt.Errorf("organization %q is not a name or group path", s.Organization)
		}
	case !s.Instance:
		return errors.New("scope needs a repository, an organization or the instance")
	}
	return nil
}

// validPath reports whether p is at least min non-empty segments joined by "/".
func validPath(p string, minSegments int) bool {
	parts := strings.Split(p, "/")
	if len(parts) < minSegments {
		return false
	}
	for _, part := range parts {
		if part == "" || strings.TrimSpace(part) != part {
			return false
		}
	}
	return true
}

// String is the repository path, the organization, or "(instance)".
func (s Scope) String() string {
	switch {
	case s.IsRepository():
		return s.Repository
	case s.Organization != "":
		return s.Organization
	case s.Instance:
		return "(instance)"
	}
	return ""
}

// Contains reports whether a job of repository (its path) is in the scope, ignoring case as
// GitHub does for account and repository names (GitLab and Buildkite paths are lower-case in
// practice): a repository scope holds that repository only; an organization scope holds every
// repository under it, nested groups included ("group" holds "group/sub/project" but not
// "groupie/project"); an instance scope holds everything.
func (s Scope) Contains(repository string) bool {
	switch {
	case s.IsRepository():
		return strings.EqualFold(s.Repository, repository)
	case s.Organization != "":
		prefix := s.Organization + "/"
		return len(repository) > len(prefix) && strings.EqualFold(repository[:len(prefix)], prefix)
	default:
		return s.Instance
	}
}
