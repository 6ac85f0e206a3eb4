package winrmclient

import "strings"

// PSQuote quotes s as a PowerShell single-quoted string: the one way HyperFleet writes a value
// into a script. PowerShell ends such a string at any of its single-quote characters (' and the
// typographic ‘ ’ ‚ ‛) and reads two in a row as one, so each is doubled, as PowerShell's own
// CodeGeneration.EscapeSingleQuotedStringContent does. Doubling the ASCII quote alone would let a
// value end the string and have the rest of it run as commands.
func PSQuote(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for _, r := range s {
		if isSingleQuote(r) {
			b.WriteRune(r)
		}
		b.WriteRune(r)
	}
	b.WriteByte('\'')
	return b.String()
}

func isSingleQuote(r rune) bool {
	return r == '\'' || r == '\u2018' || r == '\u2019' || r == '\u201A' || r == '\u201B'
}
