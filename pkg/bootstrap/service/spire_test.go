package service_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/bootstraptest"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/service"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// svidSource stands in for SPIRE's Workload API (the real one is exercised with real SPIRE
// processes in cmd/hyperfleet-agent's TestAgentWithSPIRE).
type svidSource struct {
	svid   *x509svid.SVID
	bundle *x509bundle.Bundle
}

func (s svidSource) GetX509SVID() (*x509svid.SVID, error) { return s.svid, nil }
func (s svidSource) GetX509BundleForTrustDomain(td spiffeid.TrustDomain) (*x509bundle.Bundle, error) {
	return s.bundle.GetX509BundleForTrustDomain(td)
}

func TestSPIREModeChecksTheServiceIdentity(t *testing.T) {
	ca, _, _, err := identity.NewCA(td, time.Hour)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	issue := func(id spiffeid.ID) svidSource {
		svid, err := ca.IssueServerSVID(id, nil, nil, time.Hour)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		return svidSource{svid: svid, bundle: ca.Bundle()}
	}

	t.Run("the SVID VMs accept", func(t *testing.T) {
		g := NewWithT(t)
		srv, err := service.New(service.Options{Client: env.Client, SPIRE: issue(identity.BootstrapServiceID(td)), Platforms: bootstraptest.Platforms(env.Client)})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(srv.TrustDomain()).To(Equal(td))
	})
	t.Run("an SVID registered under another ID is refused with what to register", func(t *testing.T) {
		_, err := service.New(service.Options{Client: env.Client, SPIRE: issue(spiffeid.RequireFromPath(td, "/ns/hyperfleet-system/sa/bootstrap")),
			Platforms: bootstraptest.Platforms(env.Client)})
		NewWithT(t).Expect(err).To(MatchError(And(
			ContainSubstring("spiffe://hyperfleet.test/ns/hyperfleet-system/sa/bootstrap"),
			ContainSubstring("register the bootstrap service under that SPIFFE ID"),
			ContainSubstring("spiffe://hyperfleet.test/hyperfleet/bootstrap-service"))))
	})
	t.Run("neither a CA nor SPIRE", func(t *testing.T) {
		_, err := service.New(service.Options{Client: env.Client, Platforms: bootstraptest.Platforms(env.Client)})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("a CA and an Attestor, or a SPIRE Workload API source")))
	})
	t.Run("no CI platform", func(t *testing.T) {
		_, err := service.New(service.Options{Client: env.Client, SPIRE: issue(identity.BootstrapServiceID(td))})
		NewWithT(t).Expect(err).To(MatchError(ContainSubstring("needs a CI platform Source")))
	})
}
