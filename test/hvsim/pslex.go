package hvsim

import (
	"fmt"
	"strings"
)

// A model of how PowerShell's tokenizer splits a script into strings, comments, statement
// separators and the rest, so the simulator reads a script where PowerShell would end a string,
// not where an ASCII-only reading would. It follows PowerShell's tokenizer (CharExtensions and
// Tokenizer.ScanStringLiteral): any of ' ‘ ’ ‚ ‛ opens and ends a single-quoted string, and two
// single quotes in a row, of any of those kinds, stand for the second one; any of " “ ” „ opens
// and ends a double-quoted string, where a backtick escapes the next character. A backtick
// outside strings makes the next character plain text, so it opens no string. Here-strings and
// comments are recognised; a double-quoted string's $( ) subexpressions are not (HyperFleet sends
// none), nor are the other token kinds, which the simulator does not need apart.

// PSTokenKind is what a PSToken is.
type PSTokenKind int

// The token kinds the model tells apart.
const (
	// PSText is anything else: command names, arguments, variables, operators, white space.
	PSText PSTokenKind = iota
	// PSSingleQuoted is a single-quoted string or here-string; Value is its content.
	PSSingleQuoted
	// PSDoubleQuoted is a double-quoted (expandable) string or here-string; Value is its content
	// between the quotes, not expanded.
	PSDoubleQuoted
	// PSComment is a line comment (# to the end of the line) or a block comment (<# … #>).
	PSComment
	// PSSeparator ends a statement: a semicolon or a line break.
	PSSeparator
)

// PSToken is one token of a script: its kind, its text as written and, for a string, its value.
type PSToken struct {
	Kind  PSTokenKind
	Text  string
	Value string
}

// IsPSSingleQuote reports whether PowerShell reads r as a single quote.
func IsPSSingleQuote(r rune) bool {
	return r == '\'' || r == '\u2018' || r == '\u2019' || r == '\u201A' || r == '\u201B'
}

// IsPSDoubleQuote reports whether PowerShell reads r as a double quote.
func IsPSDoubleQuote(r rune) bool {
	return r == '"' || r == '\u201C' || r == '\u201D' || r == '\u201E'
}

// LexPowerShell splits script into tokens. It fails, as PowerShell's parser does before running
// anything, on a string, here-string or block comment that is not closed.
func LexPowerShell(script string) ([]PSToken, error) {
	rs := []rune(script)
	var out []PSToken
	text := -1 // start of the PSText token being read
	flush := func(end int) {
		if text >= 0 {
			out = append(out, PSToken{Kind: PSText, Text: string(rs[text:end])})
			text = -1
		}
	}
	for i := 0; i < len(rs); {
		r := rs[i]
		var tok PSToken
		var end int
		var err error
		switch {
		case r == '@' && i+1 < len(rs) && (IsPSSingleQuote(rs[i+1]) || IsPSDoubleQuote(rs[i+1])):
			tok, end, err = lexHereString(rs, i)
		case IsPSSingleQuote(r):
			tok, end, err = lexSingleQuoted(rs, i)
		case IsPSDoubleQuote(r):
			tok, end, err = lexDoubleQuoted(rs, i)
		case r == '<' && i+1 < len(rs) && rs[i+1] == '#':
			end = i + 2
			for end+1 < len(rs) && (rs[end] != '#' || rs[end+1] != '>') {
				end++
			}
			if end+1 >= len(rs) {
				return nil, fmt.Errorf("missing closing '#>' of the block comment at character %d", i)
			}
			end += 2
			tok = PSToken{Kind: PSComment, Text: string(rs[i:end])}
		case r == '#' && (i == 0 || strings.ContainsRune(" \t\r\n;(){}", rs[i-1])):
			end = i
			for end < len(rs) && rs[end] != '\n' && rs[end] != '\r' {
				end++
			}
			tok = PSToken{Kind: PSComment, Text: string(rs[i:end])}
		case r == ';' || r == '\n':
			tok, end = PSToken{Kind: PSSeparator, Text: string(r)}, i+1
		case r == '\r' && i+1 < len(rs) && rs[i+1] == '\n':
			tok, end = PSToken{Kind: PSSeparator, Text: "\r\n"}, i+2
		case r == '`':
			// The escaped character is plain text, even a quote or a line break.
			if text < 0 {
				text = i
			}
			i = min(i+2, len(rs))
			continue
		default:
			if text < 0 {
				text = i
			}
			i++
			continue
		}
		if err != nil {
			return nil, err
		}
		flush(i)
		out = append(out, tok)
		i = end
	}
	flush(len(rs))
	return out, nil
}

// lexSingleQuoted reads the single-quoted string opening at rs[start].
func lexSingleQuoted(rs []rune, start int) (PSToken, int, error) {
	var v strings.Builder
	for j := start + 1; j < len(rs); j++ {
		if IsPSSingleQuote(rs[j]) {
			if j+1 < len(rs) && IsPSSingleQuote(rs[j+1]) {
				v.WriteRune(rs[j+1])
				j++
				continue
			}
			return PSToken{Kind: PSSingleQuoted, Text: string(rs[start : j+1]), Value: v.String()}, j + 1, nil
		}
		v.WriteRune(rs[j])
	}
	return PSToken{}, 0, fmt.Errorf("the string starting at character %d is missing its terminator", start)
}

// lexDoubleQuoted reads the double-quoted string opening at rs[start].
func lexDoubleQuoted(rs []rune, start int) (PSToken, int, error) {
	for j := start + 1; j < len(rs); j++ {
		switch {
		case rs[j] == '`':
			j++
		case IsPSDoubleQuote(rs[j]):
			if j+1 < len(rs) && IsPSDoubleQuote(rs[j+1]) {
				j++
				continue
			}
			return PSToken{Kind: PSDoubleQuoted, Text: string(rs[start : j+1]), Value: string(rs[start+1 : j])}, j + 1, nil
		}
	}
	return PSToken{}, 0, fmt.Errorf("the string starting at character %d is missing its terminator", start)
}

// lexHereString reads the here-string opening at rs[start] ('@' and a quote): its header ends the
// line, and it ends at a line that starts with a quote of its kind and '@'.
func lexHereString(rs []rune, start int) (PSToken, int, error) {
	single := IsPSSingleQuote(rs[start+1])
	isQuote := IsPSDoubleQuote
	kind := PSDoubleQuoted
	if single {
		isQuote, kind = IsPSSingleQuote, PSSingleQuoted
	}
	j := start + 2
	for j < len(rs) && (rs[j] == ' ' || rs[j] == '\t') {
		j++
	}
	switch {
	case j < len(rs) && rs[j] == '\n':
		j++
	case j+1 < len(rs) && rs[j] == '\r' && rs[j+1] == '\n':
		j += 2
	default:
		return PSToken{}, 0, fmt.Errorf("no characters are allowed after the here-string header at character %d", start)
	}
	body := j
	// From the header's own line break, so an empty here-string ends at once.
	for k := j - 1; k < len(rs); k++ {
		if rs[k] != '\n' || k+2 >= len(rs) || !isQuote(rs[k+1]) || rs[k+2] != '@' {
			continue
		}
		stop := k
		if stop > body && rs[stop-1] == '\r' {
			stop--
		}
		if stop < body {
			stop = body
		}
		return PSToken{Kind: kind, Text: string(rs[start : k+3]), Value: string(rs[body:stop])}, k + 3, nil
	}
	return PSToken{}, 0, fmt.Errorf("the here-string starting at character %d is missing its terminator", start)
}

// canonicalScript writes tokens back with every string in one spelling: single-quoted strings
// with ASCII quotes and an ASCII quote in their value doubled, double-quoted strings between
// ASCII double quotes. The simulator matches the scripts it knows against this text, so a
// string ends for it exactly where it ends for PowerShell, and text outside the strings stays as
// it was sent.
func canonicalScript(tokens []PSToken) string {
	var b strings.Builder
	for _, t := range tokens {
		switch t.Kind {
		case PSSingleQuoted:
			b.WriteString("'" + strings.ReplaceAll(t.Value, "'", "''") + "'")
		case PSDoubleQuoted:
			b.WriteString(`"` + t.Value + `"`)
		default:
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// PSStatements splits tokens into statements at every semicolon and line break outside strings,
// those inside braces and subexpressions included, so a command nested in a script block or an
// @( ) or $( ) list is a statement of its own. Each is its text as sent, trimmed; comments and
// empty statements are left out. It is meant for telling which commands a script would run, not
// for parsing it.
func PSStatements(tokens []PSToken) []string {
	var out []string
	var cur strings.Builder
	end := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	for _, t := range tokens {
		switch t.Kind {
		case PSComment:
		case PSSeparator:
			end()
		default:
			cur.WriteString(t.Text)
		}
	}
	end()
	return out
}
