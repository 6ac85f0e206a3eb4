package winrmclient

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// A listener that redirects must not get the client to send the credentials somewhere else.
func TestRedirectsAreNotFollowed(t *testing.T) {
	for _, auth := range []string{AuthBasic, AuthNTLM} {
		t.Run(auth, func(t *testing.T) {
			g := NewWithT(t)
			var stolen atomic.Int32
			thief := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				stolen.Add(1)
				w.Header().Set("WWW-Authenticate", "Negotiate")
				w.WriteHeader(http.StatusUnauthorized)
			}))
			defer thief.Close()
			redirector := httptest.NewTLSServer(http.RedirectHandler(thief.URL+"/wsman", http.StatusTemporaryRedirect))
			defer redirector.Close()

			var bundle []byte
			for _, s := range []*httptest.Server{thief, redirector} {
				bundle = append(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})...)
			}
			c, err := New(Config{Endpoint: redirector.URL + "/wsman", Username: testUser, Password: testPassword,
				Auth: auth, CABundle: bundle})
			g.Expect(err).NotTo(HaveOccurred())
			_, err = c.RunPowerShell(context.Background(), "whoami")
			g.Expect(err).To(MatchError(hypervisor.ErrInvalid))
			g.Expect(err).To(MatchError(ContainSubstring("HTTP 307")))
			g.Expect(stolen.Load()).To(BeZero())
		})
	}
}
