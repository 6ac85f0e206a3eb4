package console

import (
	"net/url"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// TestSafeNextKeepsRedirectsOnTheConsole plays an attacker who sends a person a sign-in link whose
// next page is on another host, in every spelling a browser might still read as one: control
// characters it drops, backslashes it takes for slashes, percent-encoded ones, other schemes, dot
// segments, look-alike Unicode and values too long for the sign-in cookie. Each must come back as
// a path of the console itself.
func TestSafeNextKeepsRedirectsOnTheConsole(t *testing.T) {
	for _, tc := range []struct {
		name, next, want string
	}{
		{"the inventory", "/", "/"},
		{"a job page", "/jobs/create:team-a:vm-1", "/jobs/create:team-a:vm-1"},
		{"a query", "/jobs?x=1", "/jobs?x=1"},
		{"an encoded query", "/vms/new?cluster=team-a%2Fpve", "/vms/new?cluster=team-a%2Fpve"},
		{"a trailing slash", "/pools/", "/pools/"},
		{"a query naming another host stays a query", "/?next=//evil.example.com", "/?next=%2F%2Fevil.example.com"},
		{"dot segments are cleaned", "/.//evil.example.com", "/evil.example.com"},
		{"parent segments are cleaned", "/..//evil.example.com", "/evil.example.com"},
		{"dot segments before a double slash", "/./../..//evil.example.com", "/evil.example.com"},

		{"empty", "", "/"},
		{"a relative path", "evil.example.com", "/"},
		{"a scheme-relative URL", "//evil.example.com", "/"},
		{"three slashes", "///evil.example.com", "/"},
		{"four slashes", "////evil.example.com", "/"},
		{"an absolute URL", "https://evil.example.com/", "/"},
		{"a scheme without slashes", "https:evil.example.com", "/"},
		{"a scheme with one slash", "http:/evil.example.com", "/"},
		{"javascript", "javascript:alert(1)", "/"},
		{"a data URL", "data:text/html,<script>alert(1)</script>", "/"},
		{"tab then slash", "/\t/evil.example.com", "/"},
		{"tab then backslash", "/\t\\evil.example.com", "/"},
		{"leading tab", "\t//evil.example.com", "/"},
		{"carriage return", "/\r/evil.example.com", "/"},
		{"line feed", "/\n/evil.example.com", "/"},
		{"CRLF", "/\r\n/evil.example.com", "/"},
		{"NUL", "/\x00/evil.example.com", "/"},
		{"vertical tab", "/\v/evil.example.com", "/"},
		{"form feed", "/\f/evil.example.com", "/"},
		{"DEL", "/\x7f/evil.example.com", "/"},
		{"space", "/ /evil.example.com", "/"},
		{"a header injection", "/\r\nSet-Cookie: x=y", "/"},
		{"backslash", "/\\evil.example.com", "/"},
		{"two backslashes", "\\\\evil.example.com", "/"},
		{"backslash then slash", "\\/evil.example.com", "/"},
		{"slash backslash slash", "/\\/evil.example.com", "/"},
		{"encoded tab", "/%09/evil.example.com", "/"},
		{"encoded line feed", "/%0a/evil.example.com", "/"},
		{"encoded NUL", "/%00/evil.example.com", "/"},
		{"encoded backslash", "/%5Cevil.example.com", "/"},
		{"encoded slashes", "/%2F%2Fevil.example.com", "/"},
		{"one encoded slash", "/%2f/evil.example.com", "/"},
		{"encoded fullwidth solidus", "/%EF%BC%8F%EF%BC%8Fevil.example.com", "/"},
		{"bad percent-encoding", "/%zz/evil.example.com", "/"},
		{"fullwidth solidus", "/\uff0f\uff0fevil.example.com", "/"},
		{"division slash", "/\u2215\u2215evil.example.com", "/"},
		{"fullwidth reverse solidus", "/\uff3cevil.example.com", "/"},
		{"zero-width space", "/\u200b/evil.example.com", "/"},
		{"line separator", "/\u2028/evil.example.com", "/"},
		{"next line", "/\u0085/evil.example.com", "/"},
		{"user info", "//user@evil.example.com", "/"},
		{"too long", "/" + strings.Repeat("a", 2*maxNextLength), "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := safeNext(tc.next)
			g.Expect(got).To(Equal(tc.want))
			// Whatever a browser makes of it, it stays on the console: the result has nothing a
			// browser drops or rewrites, and resolves to the console's own origin.
			g.Expect(plainASCII(got)).To(BeTrue())
			g.Expect(got).To(HavePrefix("/"))
			g.Expect(got).NotTo(HavePrefix("//"))
			base, _ := url.Parse("https://console.example.com/oidc/callback")
			ref, err := url.Parse(got)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(base.ResolveReference(ref).Host).To(Equal("console.example.com"))
			g.Expect(safeNext(got)).To(Equal(got), "a kept page is kept as it is")
		})
	}
}
