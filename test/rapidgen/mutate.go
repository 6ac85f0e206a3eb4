// Package rapidgen holds generators the project's property tests (pgregory.net/rapid) share.
package rapidgen

import (
	"bytes"

	"pgregory.net/rapid"
)

// Mutate changes a copy of s in one generated way: a byte flipped, inserted or removed, a cut,
// or a replacement of at most maxNew bytes. The result may equal s (a flip to the same byte is
// not drawn, but a cut of nothing is); callers compare. Draws are labelled with label.
func Mutate(rt *rapid.T, label string, s []byte, maxNew int) []byte {
	out := bytes.Clone(s)
	switch op := rapid.IntRange(0, 4).Draw(rt, label+"Op"); {
	case op == 0 && len(out) > 0:
		i := rapid.IntRange(0, len(out)-1).Draw(rt, label+"At")
		out[i] ^= byte(rapid.IntRange(1, 255).Draw(rt, label+"Xor"))
	case op == 1:
		i := rapid.IntRange(0, len(out)).Draw(rt, label+"At")
		out = append(out[:i], append([]byte{rapid.Byte().Draw(rt, label+"Byte")}, out[i:]...)...)
	case op == 2 && len(out) > 0:
		i := rapid.IntRange(0, len(out)-1).Draw(rt, label+"At")
		out = append(out[:i], out[i+1:]...)
	case op == 3:
		out = out[:rapid.IntRange(0, len(out)).Draw(rt, label+"Cut")]
	default:
		out = rapid.SliceOfN(rapid.Byte(), 0, maxNew).Draw(rt, label+"New")
	}
	return out
}
