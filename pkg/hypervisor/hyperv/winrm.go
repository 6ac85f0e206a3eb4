package hyperv

import (
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv/winrmclient"
)

// WinRMShell reaches a host through HyperFleet's WinRM client: HTTPS verified against the CA
// bundle unless the config says otherwise, Basic or NTLM, every request bounded by the timeout.
func WinRMShell(h Host, cfg Config) (Shell, error) {
	return winrmclient.New(winrmclient.Config{
		Endpoint: h.Endpoint, Username: cfg.Username, Password: cfg.Password, Auth: cfg.Auth,
		CABundle: cfg.CABundle, InsecureSkipVerify: cfg.InsecureSkipVerify, AllowInsecureHTTP: cfg.AllowInsecureHTTP,
		OperationTimeout: cfg.Timeout,
	})
}
