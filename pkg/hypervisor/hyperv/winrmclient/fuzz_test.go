package winrmclient

import (
	"strings"
	"testing"
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

// FuzzPSQuote: any path round-trips through PowerShell's single-quote rules, so it can never end
// the literal it is placed in.
func FuzzPSQuote(f *testing.F) {
	f.Add(`C:\x'; Remove-Item C:\ ; '`)
	f.Add("\u2019\u2018\u201a\u201b")
	f.Fuzz(func(t *testing.T, s string) {
		if !strings.ContainsRune(s, '\uFFFD') {
			v, rest, ok := unquote(psQuote(s))
			if !ok || rest != "" || v != s {
				t.Fatalf("psQuote(%q) does not round-trip: %q %q %v", s, v, rest, ok)
			}
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
