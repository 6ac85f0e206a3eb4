package hvsim

import (
	"testing"

	. "github.com/onsi/gomega"
)

// TestLexPowerShell: the model reads strings where PowerShell's tokenizer does. The cases are
// PowerShell's own rules: every single-quote character opens and ends a string, two in a row
// (of any kinds) are one, the second; a backtick outside strings escapes a quote.
func TestLexPowerShell(t *testing.T) {
	type tok struct {
		kind  PSTokenKind
		value string
	}
	for _, tc := range []struct {
		name   string
		script string
		want   []tok
	}{
		{"ASCII quotes doubled", `'it''s'`, []tok{{PSSingleQuoted, "it's"}}},
		{"a typographic quote ends the string", "'C:\\HF\u2019; Remove-VM; \u2019x'",
			[]tok{{PSSingleQuoted, `C:\HF`}, {PSSeparator, ""}, {PSText, " Remove-VM"}, {PSSeparator, ""}, {PSText, " "}, {PSSingleQuoted, "x"}}},
		{"a typographic quote opens one", "\u2018a\u201b", []tok{{PSSingleQuoted, "a"}}},
		{"a doubled typographic quote is one", "'a\u2019\u2019b'", []tok{{PSSingleQuoted, "a\u2019b"}}},
		{"two quotes of different kinds are the second", "'a'\u2019b\u201a'c'", []tok{{PSSingleQuoted, "a\u2019b'c"}}},
		{"double quotes inside single quotes are text", "'a\u201c\"b'", []tok{{PSSingleQuoted, "a\u201c\"b"}}},
		{"double-quoted with a backtick", "\"a`\"b\u201d", []tok{{PSDoubleQuoted, "a`\"b"}}},
		{"single quote inside double quotes", `"it's"`, []tok{{PSDoubleQuoted, "it's"}}},
		{"backtick escapes a quote", "Write-Output `\u2019x", []tok{{PSText, "Write-Output `\u2019x"}}},
		{"comment to the end of the line", "a # it's\nb", []tok{{PSText, "a "}, {PSComment, ""}, {PSSeparator, ""}, {PSText, "b"}}},
		{"hash inside a word", "a#'b'", []tok{{PSText, "a#"}, {PSSingleQuoted, "b"}}},
		{"block comment", "<# it's #>a", []tok{{PSComment, ""}, {PSText, "a"}}},
		{"here-string", "@'\nit's\n'@", []tok{{PSSingleQuoted, "it's"}}},
		{"empty here-string", "@'\n'@;x", []tok{{PSSingleQuoted, ""}, {PSSeparator, ""}, {PSText, "x"}}},
		{"here-string ends at a typographic quote", "@\u2018\r\na\r\n\u2019@", []tok{{PSSingleQuoted, "a"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			tokens, err := LexPowerShell(tc.script)
			g.Expect(err).NotTo(HaveOccurred())
			var got []tok
			for _, tk := range tokens {
				got = append(got, tok{tk.Kind, tk.Value})
				if tk.Kind == PSText {
					got[len(got)-1].value = tk.Text
				}
			}
			g.Expect(got).To(Equal(tc.want))
		})
	}
	for _, unclosed := range []string{"'a", "'a''", "'a\u2019\u2019", `"a`, "\"a`\"", "<# a", "@'\na\n", "@' x\n'@"} {
		_, err := LexPowerShell(unclosed)
		NewWithT(t).Expect(err).To(HaveOccurred(), unclosed)
	}
}

// TestPSStatements: statements end at semicolons and line breaks outside strings, in nested
// blocks and subexpressions too.
func TestPSStatements(t *testing.T) {
	g := NewWithT(t)
	tokens, err := LexPowerShell("$d = 'C:\\HF\u2019; Stop-VM -Name db -TurnOff; \u2019x'\r\n" +
		"if ($a) {\n  b; c\n}\n# done\nforeach ($x in @('a;b')) { New-Item $x }\n@('C:\\x'; Stop-VM db; 'y')")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(PSStatements(tokens)).To(Equal([]string{
		"$d = 'C:\\HF\u2019",
		"Stop-VM -Name db -TurnOff",
		"\u2019x'",
		"if ($a) {",
		"b",
		"c",
		"}",
		"foreach ($x in @('a;b')) { New-Item $x }",
		"@('C:\\x'",
		"Stop-VM db",
		"'y')",
	}))
}
