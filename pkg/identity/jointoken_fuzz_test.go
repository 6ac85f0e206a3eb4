package identity

import (
	"strings"
	"testing"
)

// FuzzParseJoinToken: a token that parses names one BootstrapConfig unambiguously and is exactly
// hfjt_<namespace>_<name>_<64 hex>; its hash matches it and nothing else.
func FuzzParseJoinToken(f *testing.F) {
	f.Add("hfjt_ns_name_00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
	f.Add("hfjt_ns_name_0011")
	f.Add("hfjt_a_b_c_00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
	f.Add("hfjt___00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
	f.Fuzz(func(t *testing.T, token string) {
		ref, err := ParseJoinToken(token)
		if err != nil {
			return
		}
		if ref.Namespace == "" || ref.Name == "" || strings.Contains(ref.Namespace+ref.Name, "_") {
			t.Fatalf("%q parsed into %+v", token, ref)
		}
		prefix := joinTokenPrefix + "_" + ref.Namespace + "_" + ref.Name + "_"
		if !strings.HasPrefix(token, prefix) || len(token) != len(prefix)+64 {
			t.Fatalf("%q parsed into %+v, which is not what it says", token, ref)
		}
		if !JoinTokenMatches(token, HashJoinToken(token)) {
			t.Fatalf("%q does not match its own hash", token)
		}
		if JoinTokenMatches(token+"0", HashJoinToken(token)) || JoinTokenMatches(token[:len(token)-1], HashJoinToken(token)) {
			t.Fatalf("another token matches the hash of %q", token)
		}
	})
}

// FuzzNewJoinToken: every token NewJoinToken issues parses back to the BootstrapConfig it was
// issued for.
func FuzzNewJoinToken(f *testing.F) {
	f.Add("ns", "name")
	f.Add("a_b", "c")
	f.Add("", "x")
	f.Fuzz(func(t *testing.T, ns, name string) {
		token, err := NewJoinToken(JoinTokenRef{Namespace: ns, Name: name})
		if err != nil {
			return
		}
		ref, err := ParseJoinToken(token)
		if err != nil || ref.Namespace != ns || ref.Name != name {
			t.Fatalf("token for %s/%s parses into %+v, %v", ns, name, ref, err)
		}
	})
}
