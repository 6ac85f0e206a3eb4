package console

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Principal is a signed-in person as the console impersonates them.
type Principal struct {
	// User and Groups are the Kubernetes user and groups impersonated, prefixes included.
	User   string   `json:"user"`
	Groups []string `json:"groups,omitempty"`
	// Name is shown in the UI.
	Name string `json:"name,omitempty"`
	// ReadOnly is set when the person holds only the read-only role.
	ReadOnly bool `json:"readOnly,omitempty"`
}

// Errors of turning a token's claims into a Principal.
var (
	// ErrNoRole: the token carries neither the console's role nor its read-only role.
	ErrNoRole = errors.New("the token carries no role that grants access to the console")
	// ErrNoUsername: the token lacks the username claim.
	ErrNoUsername = errors.New("the token carries no username claim")
)

// principalFromClaims reads who the claims name and what role they hold.
func (s Settings) principalFromClaims(claims map[string]any) (Principal, error) {
	roles := stringList(claims[s.RoleClaim])
	p := Principal{}
	switch {
	case slices.Contains(roles, s.RoleName):
	case s.ReadOnlyRoleName != "" && slices.Contains(roles, s.ReadOnlyRoleName):
		p.ReadOnly = true
	default:
		return Principal{}, fmt.Errorf("%w (claim %q must hold %q)", ErrNoRole, s.RoleClaim, s.RoleName)
	}
	user, _ := claims[s.UsernameClaim].(string)
	if strings.TrimSpace(user) == "" {
		return Principal{}, fmt.Errorf("%w %q", ErrNoUsername, s.UsernameClaim)
	}
	p.User = s.UsernamePrefix + user
	for _, g := range stringList(claims[s.GroupsClaim]) {
		p.Groups = append(p.Groups, s.GroupsPrefix+g)
	}
	// Without a prefix a token could name Kubernetes' own users and groups (system:masters):
	// those are never impersonated.
	if strings.HasPrefix(p.User, "system:") {
		return Principal{}, fmt.Errorf("username %q is reserved by Kubernetes", p.User)
	}
	p.Groups = slices.DeleteFunc(p.Groups, func(g string) bool { return strings.HasPrefix(g, "system:") })
	p.Name, _ = claims["name"].(string)
	if p.Name == "" {
		p.Name = user
	}
	return p, nil
}

// stringList reads a claim that is a list of strings or a single string.
func stringList(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case []string:
		return v
	}
	return nil
}
