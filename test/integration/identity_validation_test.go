package integration

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/hyperfleet-io/hyperfleet/test/builder"
)

// TestPlainHTTPNeedsExplicitConsent: a HypervisorCluster whose endpoint is http:// would send the
// Proxmox API token in clear text. The API server refuses it, with a message saying why and what
// to do, unless allowInsecureHTTP says the owner accepts that.
func TestPlainHTTPNeedsExplicitConsent(t *testing.T) {
	ns := newNamespace(t, "http")
	for _, tc := range []struct {
		name, object, endpoint string
		allow                  bool
		message                string
	}{
		{name: "http refused", object: "refused", endpoint: "http://pve.example.com:8006",
			message: "endpoint is http://: the API token would travel in clear text; use https:// or, for a lab, set allowInsecureHTTP: true"},
		{name: "http allowed explicitly", object: "allowed", endpoint: "http://pve.example.com:8006", allow: true},
		{name: "https needs nothing", object: "tls", endpoint: "https://pve.example.com:8006"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			hc := builder.NewHypervisorCluster(tc.object, ns).WithEndpoint(tc.endpoint).Build()
			hc.Spec.AllowInsecureHTTP = tc.allow
			err := env.Client.Create(context.Background(), hc)
			if tc.message == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.message))
		})
	}

	t.Run("the consent cannot be withdrawn while the endpoint is http", func(t *testing.T) {
		g := NewWithT(t)
		hc := builder.NewHypervisorCluster("withdrawn", ns).WithEndpoint("http://pve.example.com:8006").Build()
		hc.Spec.AllowInsecureHTTP = true
		g.Expect(env.Client.Create(context.Background(), hc)).To(Succeed())
		hc.Spec.AllowInsecureHTTP = false
		err := env.Client.Update(context.Background(), hc)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("clear text"))
	})
}

// TestIdentitiesAreImmutable: the installation ID and a claim's ID are stamped on VMs; changing or
// removing them would disown those VMs (or, set to another installation's, claim its VMs). The API
// server refuses both once they are set.
func TestIdentitiesAreImmutable(t *testing.T) {
	ns := newNamespace(t, "identity")
	ctx := context.Background()
	g := NewWithT(t)

	hc := builder.NewHypervisorCluster("pve", ns).Build()
	g.Expect(env.Client.Create(ctx, hc)).To(Succeed())
	hc.Spec.InstallationID = "0123456789abcdef"
	g.Expect(env.Client.Update(ctx, hc)).To(Succeed(), "the first value is set by HyperFleet")
	for _, id := range []string{"fedcba9876543210", ""} {
		changed := hc.DeepCopy()
		changed.Spec.InstallationID = id
		err := env.Client.Update(ctx, changed)
		g.Expect(err).To(HaveOccurred(), "installationID %q", id)
		g.Expect(err.Error()).To(ContainSubstring("installationID cannot be changed or removed once set"))
	}
	bad := builder.NewHypervisorCluster("bad-id", ns).Build()
	bad.Spec.InstallationID = "Not An ID"
	g.Expect(env.Client.Create(ctx, bad)).NotTo(Succeed())

	claim := builder.NewMachineClaim("vm", ns).Build()
	g.Expect(env.Client.Create(ctx, claim)).To(Succeed())
	claim.Spec.ClaimID = "00112233aabbccdd"
	g.Expect(env.Client.Update(ctx, claim)).To(Succeed())
	for _, id := range []string{"ffeeddccbbaa9988", ""} {
		changed := claim.DeepCopy()
		changed.Spec.ClaimID = id
		err := env.Client.Update(ctx, changed)
		g.Expect(err).To(HaveOccurred(), "claimID %q", id)
		g.Expect(err.Error()).To(ContainSubstring("claimID cannot be changed or removed once set"))
	}
}
