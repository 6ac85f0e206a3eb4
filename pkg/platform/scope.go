package platform

import (
	"errors"
	"fmt"
	"strings"
)

// Scope is where runners register and jobs are looked for: one repository ("owner/name") or a
// whole organization. When both are set the repository wins, because repository-level
// configuration takes precedence over organization-level on GitHub and a repository runner is
// the narrower grant; the organization then only documents where the repository lives.
type Scope struct {
	Organization string
	Repository   string
}

// IsRepository reports whether the scope is a single repository.
func (s Scope) IsRepository() bool { return s.Repository != "" }

// Owner is the account the scope belongs to: the organization, or the repository's owner.
func (s Scope) Owner() string {
	if s.IsRepository() {
		owner, _, _ := strings.Cut(s.Repository, "/")
		return owner
	}
	return s.Organization
}

// RepositoryParts splits Repository into owner and name.
func (s Scope) RepositoryParts() (owner, name string) {
	owner, name, _ = strings.Cut(s.Repository, "/")
	return owner, name
}

// Effective returns the scope with only the field that applies set.
func (s Scope) Effective() Scope {
	if s.IsRepository() {
		return Scope{Repository: s.Repository}
	}
	return Scope{Organization: s.Organization}
}

// Validate checks that the scope names a repository "owner/name" or an organization.
func (s Scope) Validate() error {
	if s.IsRepository() {
		owner, name, ok := strings.Cut(s.Repository, "/")
		if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
			return fmt.Errorf("repository %q is not owner/name", s.Repository)
		}
		return nil
	}
	if s.Organization == "" || strings.Contains(s.Organization, "/") {
		return errors.New("scope needs a repository (owner/name) or an organization")
	}
	return nil
}

// String is "owner/name" for a repository scope and the organization's name otherwise.
func (s Scope) String() string {
	if s.IsRepository() {
		return s.Repository
	}
	return s.Organization
}

// Contains reports whether a job of repository ("owner/name") is in the scope, ignoring case
// as GitHub does for account and repository names.
func (s Scope) Contains(repository string) bool {
	if s.IsRepository() {
		return strings.EqualFold(s.Repository, repository)
	}
	owner, _, _ := strings.Cut(repository, "/")
	return strings.EqualFold(s.Organization, owner)
}
