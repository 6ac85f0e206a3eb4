package console

import (
	"testing"

	. "github.com/onsi/gomega"
)

// TestUnverifiedEmailIsNotImpersonated plays a person who registers someone else's address with
// the identity provider without proving it is theirs: with the email username claim the console
// would impersonate the victim, with the victim's namespace RBAC. As the API server's OIDC
// authenticator, it refuses a token whose email_verified is anything but true, and takes a token
// without the claim at its word.
func TestUnverifiedEmailIsNotImpersonated(t *testing.T) {
	byEmail := Settings{RoleName: "op", RoleClaim: "roles", UsernameClaim: "email", GroupsClaim: "groups", UsernamePrefix: "oidc:", GroupsPrefix: "oidc:"}
	bySubject := byEmail
	bySubject.UsernameClaim = "sub"
	victim := func(extra map[string]any) map[string]any {
		c := map[string]any{"sub": "attacker-id", "email": "victim@example.com", "roles": []any{"op"}}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	for _, tc := range []struct {
		name     string
		settings Settings
		claims   map[string]any
		wantUser string
		wantErr  error
	}{
		{"email_verified false", byEmail, victim(map[string]any{"email_verified": false}), "", ErrEmailNotVerified},
		{"email_verified the string true", byEmail, victim(map[string]any{"email_verified": "true"}), "", ErrEmailNotVerified},
		{"email_verified null", byEmail, victim(map[string]any{"email_verified": nil}), "", ErrEmailNotVerified},
		{"email_verified 1", byEmail, victim(map[string]any{"email_verified": float64(1)}), "", ErrEmailNotVerified},
		{"email_verified true", byEmail, victim(map[string]any{"email_verified": true}), "oidc:victim@example.com", nil},
		{"no email_verified, as Microsoft Entra ID sends", byEmail, victim(nil), "oidc:victim@example.com", nil},
		{"another username claim names the subject", bySubject, victim(map[string]any{"email_verified": false}), "oidc:attacker-id", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p, err := tc.settings.principalFromClaims(tc.claims)
			if tc.wantErr != nil {
				g.Expect(err).To(MatchError(tc.wantErr))
				g.Expect(p).To(BeZero())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(p.User).To(Equal(tc.wantUser))
		})
	}
}
