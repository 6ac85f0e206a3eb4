package rapidgen

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

// TestMutateChangesACopyInOneWay: the input is never changed, a replacement is at most maxNew
// bytes, and any other result is the input with one byte flipped, added or removed, or cut
// short.
func TestMutateChangesACopyInOneWay(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		s := rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(rt, "s")
		orig := bytes.Clone(s)
		maxNew := rapid.IntRange(0, 60).Draw(rt, "maxNew")
		out := Mutate(rt, "m", s, maxNew)
		if !bytes.Equal(s, orig) {
			rt.Fatalf("the input was changed: %q, was %q", s, orig)
		}
		if oneEdit(orig, out) {
			return
		}
		if len(out) > maxNew {
			rt.Fatalf("%q is neither one edit of %q nor a replacement of at most %d bytes", out, orig, maxNew)
		}
	})
}

// oneEdit reports whether out is s with one byte changed, added or removed, or a prefix of s.
func oneEdit(s, out []byte) bool {
	switch {
	case bytes.HasPrefix(s, out):
		return true
	case len(out) == len(s):
		diff := 0
		for i := range s {
			if s[i] != out[i] {
				diff++
			}
		}
		return diff == 1
	case len(out) == len(s)+1:
		for i := range out {
			if bytes.Equal(append(bytes.Clone(out[:i]), out[i+1:]...), s) {
				return true
			}
		}
	case len(out)+1 == len(s):
		for i := range s {
			if bytes.Equal(append(bytes.Clone(s[:i]), s[i+1:]...), out) {
				return true
			}
		}
	}
	return false
}
