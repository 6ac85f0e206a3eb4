package scale

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
)

// naiveFigures compare what HyperFleet does with the naive way, measured on the same simulator
// in the same run: reading every VM's status on its own (per-VM polling) against the sweep's one
// cluster-wide listing, and a new Proxmox client (a new TLS connection) per read against one
// shared client, as the connection registry keeps one per HypervisorCluster.
type naiveFigures struct {
	calls int
	// listing is one GET /cluster/resources; perVM one status read of every VM with a shared
	// client; perVMNewClient the same with a new client for each read.
	listing, perVM, perVMNewClient time.Duration
	err                            error
}

func (h *harness) proxmoxClient() *proxmox.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(h.sim.CACertPEM())
	hc := &http.Client{Timeout: time.Minute, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	return proxmox.NewClient(h.sim.URL(), proxmox.WithHTTPClient(hc), proxmox.WithAPIToken(simulatorToken.ID, simulatorToken.Secret))
}

// measurePerVMPolling reads the status of every VM HyperFleet owns once, one request each, first
// with one shared client and then with a new client per read, and times one listing.
func measurePerVMPolling(ctx context.Context, h *harness) naiveFigures {
	var f naiveFigures
	vms := ownedVMs(h.sim)
	shared := h.proxmoxClient()
	var list []map[string]any
	start := time.Now()
	if f.err = shared.Get(ctx, "/cluster/resources?type=vm", &list); f.err != nil {
		return f
	}
	f.listing = time.Since(start)
	read := func(c *proxmox.Client, node string, vmid int) error {
		var st map[string]any
		return c.Get(ctx, fmt.Sprintf("/nodes/%s/qemu/%d/status/current", node, vmid), &st)
	}
	start = time.Now()
	for _, vm := range vms {
		if f.err = read(shared, vm.Node, vm.VMID); f.err != nil {
			return f
		}
		f.calls++
	}
	f.perVM = time.Since(start)
	start = time.Now()
	for _, vm := range vms {
		if f.err = read(h.proxmoxClient(), vm.Node, vm.VMID); f.err != nil {
			return f
		}
	}
	f.perVMNewClient = time.Since(start)
	return f
}
