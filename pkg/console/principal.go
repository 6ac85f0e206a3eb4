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
	// ErrEmailNotVerified: the username claim is email and the token says the identity provider
	// has not verified the address.
	ErrEmailNotVerified = errors.New("the token's email address is not verified by the identity provider")
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
	if err := s.checkEmailVerified(claims); err != nil {
		return Principal{}, err
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

// checkEmailVerified applies the API server's OIDC rule (k8s.io/apiserver's token authenticator)
// to an email username claim: an address the identity provider has not verified may name anyone
// (whoever typed it in at sign-up), so when the token carries email_verified it must be the boolean
// true. A token without the claim is taken at its word, as the API server does: Microsoft Entra ID,
// for one, never sends it for an organisation's accounts. The same person is then the same user
// for kubectl and for the console.
func (s Settings) checkEmailVerified(claims map[string]any) error {
	if s.UsernameClaim != "email" {
		return nil
	}
	v, present := claims["email_verified"]
	if !present {
		return nil
	}
	if verified, ok := v.(bool); !ok || !verified {
		return fmt.Errorf("%w (email_verified is %v)", ErrEmailNotVerified, v)
	}
	return nil
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
