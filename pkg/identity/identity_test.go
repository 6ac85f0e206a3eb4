package identity

import (
	"crypto/x509"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

var td = spiffeid.RequireTrustDomainFromString("hyperfleet.test")

func TestMachineIDRoundTrip(t *testing.T) {
	g := NewWithT(t)
	id, err := MachineID(td, "ns", "runner-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(id.String()).To(Equal("spiffe://hyperfleet.test/hyperfleet/machine/ns/runner-1"))
	ns, name, err := ParseMachineID(td, id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]string{ns, name}).To(Equal([]string{"ns", "runner-1"}))
	for _, other := range []spiffeid.ID{
		BootstrapServiceID(td),
		spiffeid.RequireFromPath(td, "/hyperfleet/machine/ns"),
		spiffeid.RequireFromPath(spiffeid.RequireTrustDomainFromString("other.test"), "/hyperfleet/machine/ns/m"),
	} {
		_, _, err := ParseMachineID(td, other)
		g.Expect(err).To(HaveOccurred(), other.String())
	}
}

func TestSignCSRDecidesTheIdentity(t *testing.T) {
	g := NewWithT(t)
	ca, certPEM, keyPEM, err := NewCA(td, time.Hour)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = LoadCA(td, certPEM, keyPEM)
	g.Expect(err).NotTo(HaveOccurred())
	key, csrPEM, err := NewKeyAndCSR()
	g.Expect(err).NotTo(HaveOccurred())
	csr, err := ParseCSRPEM(csrPEM)
	g.Expect(err).NotTo(HaveOccurred())
	// A CSR asking for another identity gets ours anyway.
	csr.URIs = []*url.URL{{Scheme: "spiffe", Host: "hyperfleet.test", Path: "/hyperfleet/bootstrap-service"}}
	id, _ := MachineID(td, "ns", "m")
	chain, err := ca.SignCSR(csr, id, 10*time.Minute)
	g.Expect(err).NotTo(HaveOccurred())
	svid, err := SVIDFromPEM(EncodeCertificates(chain), key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(svid.ID).To(Equal(id))
	gotID, _, err := x509svid.Verify([]*x509.Certificate{svid.Certificates[0]}, ca.Bundle())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gotID).To(Equal(id))
	g.Expect(svid.Certificates[0].NotAfter).To(BeTemporally("<=", time.Now().Add(10*time.Minute)))

	other := spiffeid.RequireFromPath(spiffeid.RequireTrustDomainFromString("other.test"), "/x")
	_, err = ca.SignCSR(csr, other, time.Minute)
	g.Expect(err).To(HaveOccurred(), "the CA signs only for its trust domain")
}
