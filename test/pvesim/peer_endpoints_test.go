package pvesim

import (
	"net/http"
	"net/url"
	"testing"

	. "github.com/onsi/gomega"
)

// A peer provider lists a node's containers to learn which VMIDs are used; the simulator serves
// the endpoint as PVE does, schema-validated like the rest.
func TestContainerListForPeers(t *testing.T) {
	g := NewWithT(t)
	s := StartForTest(t, Config{})
	ctx := testCtx(t)
	node, err := tokenClient(t, s).Node(ctx, "pve1")
	g.Expect(err).NotTo(HaveOccurred())
	cts, err := node.Containers(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cts).To(BeEmpty(), "the simulated cluster runs no containers")
	g.Expect(s.Requests()).To(HaveKeyWithValue("GET /nodes/{node}/lxc", 1))

	status, body := rawDo(t, s, http.MethodGet, "/nodes/pve1/lxc?"+url.Values{"full": {"1"}}.Encode(), nil)
	g.Expect(status).To(Equal("400 Parameter verification failed."), "lxc takes no 'full' parameter")
	g.Expect(string(body)).To(ContainSubstring("property is not defined in schema"))
	status, _ = rawDo(t, s, http.MethodGet, "/nodes/nosuch/lxc", nil)
	g.Expect(status).To(HavePrefix("500 hostname lookup 'nosuch' failed"))
}
