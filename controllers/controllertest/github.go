package controllertest

import (
	"context"
	"testing"

	"github.com/bradleyfalzon/ghinstallation/v2"
	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// MintInstallationToken gets an App installation token from the fake, as the manager would.
func MintInstallationToken(t *testing.T, gh *fakegithub.Server, repo string) string {
	t.Helper()
	tr, err := ghinstallation.New(gh.HTTPClient().Transport, gh.AppID(), gh.InstallationID(repo), gh.AppKeyPEM())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	tr.BaseURL = gh.URL()
	token, err := tr.Token(context.Background())
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(token).To(HavePrefix("ghs_"))
	return token
}
