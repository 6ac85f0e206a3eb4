package winrmclient

import (
	"testing"
	"unicode/utf8"

	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// FuzzStderrText: whatever a host writes on stderr is turned into text without a panic.
func FuzzStderrText(f *testing.F) {
	f.Add(string(clixml("VM 'ci-1' not found")))
	f.Add("#< CLIXML\r\n<Objs><S S=\"Error\">_x000")
	f.Add("plain")
	f.Fuzz(func(t *testing.T, stderr string) {
		_ = StderrText(stderr)
	})
}

// FuzzPSQuote holds PSQuote to PowerShell's tokenizer (modelled by hvsim.LexPowerShell: a string
// opens at any single quote ' ‘ ’ ‚ ‛, two in a row of any kinds are one escaped quote, one alone
// ends it): whatever s holds, its quoted form reads as exactly one string whose value is s, so
// no value can end the string and have the rest run as a command.
func FuzzPSQuote(f *testing.F) {
	f.Add(`C:\x'; Remove-Item C:\ ; '`)
	f.Add("\u2019\u2018\u201a\u201b")
	f.Fuzz(func(t *testing.T, s string) {
		quoted := PSQuote(s)
		tokens, err := hvsim.LexPowerShell(quoted)
		if err != nil {
			t.Fatalf("PSQuote(%q) = %s does not lex: %v", s, quoted, err)
		}
		if len(tokens) != 1 || tokens[0].Kind != hvsim.PSSingleQuoted {
			t.Fatalf("PSQuote(%q) = %s lexes as %d tokens: %+v", s, quoted, len(tokens), tokens)
		}
		// Invalid UTF-8 cannot reach a host as itself: the script is sent as UTF-16.
		if utf8.ValidString(s) && tokens[0].Value != s {
			t.Fatalf("PSQuote(%q) = %s reads back as %q", s, quoted, tokens[0].Value)
		}
	})
}

// FuzzParseFault: any error body is read or ignored without a panic.
func FuzzParseFault(f *testing.F) {
	f.Add([]byte(`<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Body><s:Fault><s:Detail><f:WSManFault xmlns:f="x" Code="2150858843"><f:Message>m</f:Message></f:WSManFault></s:Detail></s:Fault></s:Body></s:Envelope>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		_ = parseFault(body)
	})
}
