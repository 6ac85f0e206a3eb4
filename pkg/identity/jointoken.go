package identity

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// joinTokenPrefix marks HyperFleet builtin join tokens, so a token pasted into the wrong place is
// recognisable (and secret scanners can match it).
const joinTokenPrefix = "hfjt"

// JoinTokenRef names the BootstrapConfig a builtin join token belongs to. The token carries it in
// the clear so any replica can find the token's record with one read; the secret part is 256
// random bits whose SHA-256 is all the API server keeps.
type JoinTokenRef struct {
	Namespace string
	Name      string
}

// NewJoinToken returns a fresh token for ref: hfjt_<namespace>_<name>_<64 hex digits>. Kubernetes
// names cannot contain "_", so the token splits unambiguously.
func NewJoinToken(ref JoinTokenRef) (string, error) {
	if ref.Namespace == "" || ref.Name == "" {
		return "", errors.New("join token needs a namespace and a name")
	}
	if strings.Contains(ref.Namespace+ref.Name, "_") {
		// Kubernetes names never contain one; a token that could not be parsed back is refused.
		return "", fmt.Errorf("join token for %s/%s: names must not contain _", ref.Namespace, ref.Name)
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return "", err
	}
	return strings.Join([]string{joinTokenPrefix, ref.Namespace, ref.Name, hex.EncodeToString(secret)}, "_"), nil
}

// ParseJoinToken returns the BootstrapConfig a token claims to belong to. It does not prove the
// token is genuine: compare HashJoinToken with the stored hash for that.
func ParseJoinToken(token string) (JoinTokenRef, error) {
	parts := strings.Split(token, "_")
	if len(parts) != 4 || parts[0] != joinTokenPrefix || parts[1] == "" || parts[2] == "" || len(parts[3]) != 64 {
		return JoinTokenRef{}, errors.New("malformed join token")
	}
	if _, err := hex.DecodeString(parts[3]); err != nil {
		return JoinTokenRef{}, fmt.Errorf("malformed join token: %w", err)
	}
	return JoinTokenRef{Namespace: parts[1], Name: parts[2]}, nil
}

// HashJoinToken is the hex SHA-256 the API server stores in place of the token.
func HashJoinToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// JoinTokenMatches compares a presented token with a stored hash in constant time.
func JoinTokenMatches(token, storedHash string) bool {
	return subtle.ConstantTimeCompare([]byte(HashJoinToken(token)), []byte(storedHash)) == 1
}
