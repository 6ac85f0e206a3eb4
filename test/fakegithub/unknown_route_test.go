package fakegithub_test

import (
	"net/http"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// TestUnknownRouteIsGitHubsNotFound: what the fake does not implement is answered as GitHub
// answers a path it does not serve, a JSON 404 with GitHub's message and documentation link.
func TestUnknownRouteIsGitHubsNotFound(t *testing.T) {
	g := NewWithT(t)
	fake := fakegithub.StartForTest(t, fakegithub.Options{})
	r := call(t, http.MethodGet, fake.URL()+"/repos/acme/api/actions/caches", "token "+installationToken(t, fake, "acme"), nil)
	g.Expect(r.status).To(Equal(http.StatusNotFound))
	g.Expect(r.header.Get("Content-Type")).To(HavePrefix("application/json"))
	g.Expect(r.json(t)).To(And(HaveKeyWithValue("message", "Not Found"), HaveKey("documentation_url")))

	// A path the fake serves, with a method it does not take: GitHub's 404 too, not a 405.
	r = call(t, http.MethodPost, fake.URL()+"/rate_limit", "token "+installationToken(t, fake, "acme"), nil)
	g.Expect(r.status).To(Equal(http.StatusNotFound))
	g.Expect(r.json(t)).To(HaveKeyWithValue("message", "Not Found"))
}
