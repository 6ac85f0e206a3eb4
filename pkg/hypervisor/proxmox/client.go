package proxmox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	gpx "github.com/luthermonson/go-proxmox"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// Provider is a hypervisor.Provider for one Proxmox VE cluster. It is safe for concurrent use.
type Provider struct {
	cfg        Config
	client     *gpx.Client
	httpClient *http.Client
	// ownerTag marks this installation's VMs; legacyTag is what older releases marked them with.
	ownerTag  string
	legacyTag string
	sessionMu sync.Mutex
	// vmids is what the last listing of the cluster's VMs showed, for NextID.
	vmids vmidInventory
	// missingFeatures is what the last Verify found missing of the optional features' privileges.
	featureMu       sync.Mutex
	missingFeatures []string
	featuresKnown   bool
}

var _ hypervisor.Provider = (*Provider)(nil)

// New builds a Provider. It does not contact Proxmox; call Verify for that.
func New(cfg Config) (*Provider, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("proxmox config: %w", err)
	}
	hc, err := newHTTPClient(cfg)
	if err != nil {
		return nil, err
	}
	opts := []gpx.Option{gpx.WithHTTPClient(hc), gpx.WithUserAgent("hyperfleet")}
	if cfg.TokenID != "" {
		opts = append(opts, gpx.WithAPIToken(cfg.TokenID, cfg.TokenSecret))
	} else {
		opts = append(opts, gpx.WithCredentials(&gpx.Credentials{Username: cfg.Username, Password: cfg.Password}))
	}
	return &Provider{
		cfg:        cfg,
		client:     gpx.NewClient(cfg.Endpoint, opts...),
		httpClient: hc,
		ownerTag:   OwnerTag(cfg.InstallationID, cfg.Cluster),
		legacyTag:  ClusterTag(cfg.Cluster),
	}, nil
}

// Close drops idle connections. Calls in flight still complete, so a cache may close a provider
// it replaced while reconcilers still hold it.
func (p *Provider) Close() { p.httpClient.CloseIdleConnections() }

// newHTTPClient builds the HTTP client: TLS verified against the CA bundle (or system roots),
// every response of 400 and above turned into an *apiError by the transport.
func newHTTPClient(cfg Config) (*http.Client, error) {
	var hc http.Client
	var base http.RoundTripper
	if cfg.HTTPClient != nil {
		hc = *cfg.HTTPClient
		base = hc.Transport
	}
	if base == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: cfg.InsecureSkipVerify} //nolint:gosec // only when asked
		if len(cfg.CABundle) > 0 {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(cfg.CABundle) {
				return nil, errors.New("proxmox config: CA bundle holds no PEM certificate")
			}
			tc.RootCAs = pool
		}
		t.TLSClientConfig = tc
		base = t
	}
	// Ticket logins rely on go-proxmox seeing 401 to renew the session; tokens never do.
	hc.Transport = &errorTransport{base: base, passUnauthorized: cfg.TokenID == ""}
	// Uploads in go-proxmox carry no context, so the client timeout is their only bound.
	if hc.Timeout == 0 || hc.Timeout > cfg.Timeout {
		hc.Timeout = cfg.Timeout
	}
	return &hc, nil
}

// errorTransport turns error responses into *apiError before go-proxmox sees them: go-proxmox keeps
// only the status line of 500/501, folds 403 into "not authorized" and decodes 404 and 59x bodies
// as if they were data.
type errorTransport struct {
	base             http.RoundTripper
	passUnauthorized bool
}

func (t *errorTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(req)
	if err != nil || res.StatusCode < http.StatusBadRequest {
		return res, err
	}
	if res.StatusCode == http.StatusUnauthorized && t.passUnauthorized {
		return res, nil
	}
	defer func() { _ = res.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	return nil, newAPIError(req, res, body)
}

// call runs one API call under the per-call deadline and classifies its error.
func (p *Provider) call(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	if err := p.ensureSession(ctx); err != nil {
		return classify(op, err)
	}
	return classify(op, fn(ctx))
}

func (p *Provider) get(ctx context.Context, op, path string, out any) error {
	return p.call(ctx, op, func(ctx context.Context) error { return p.client.Get(ctx, path, out) })
}

func (p *Provider) post(ctx context.Context, op, path string, in, out any) error {
	return p.call(ctx, op, func(ctx context.Context) error { return p.client.Post(ctx, path, in, out) })
}

func (p *Provider) put(ctx context.Context, op, path string, in, out any) error {
	return p.call(ctx, op, func(ctx context.Context) error { return p.client.Put(ctx, path, in, out) })
}

func (p *Provider) delete(ctx context.Context, op, path string, out any) error {
	return p.call(ctx, op, func(ctx context.Context) error { return p.client.Delete(ctx, path, out) })
}

// ensureSession logs in once before the first call with a username and password. go-proxmox would
// otherwise send the first request unauthenticated and log in after its 401, which real PVE delays
// by three seconds.
func (p *Provider) ensureSession(ctx context.Context) error {
	if p.cfg.TokenID != "" {
		return nil
	}
	p.sessionMu.Lock()
	defer p.sessionMu.Unlock()
	if p.client.Session() != nil {
		return nil
	}
	return p.client.CreateSession(ctx)
}

// vmPath is the API path of a VM, with an optional suffix such as "/config".
func vmPath(ref hypervisor.VMRef, suffix string) string {
	return "/nodes/" + url.PathEscape(ref.Node) + "/qemu/" + vmidSegment(ref.ID) + suffix
}

// vmidSegment is a VM ID as PVE writes it. An ID that is not a VMID in decimal (another
// provider's GUID, or text crafted to reach another API path such as "100/../../access") becomes
// "0", a VMID PVE refuses, so the request fails instead of reaching another path.
func vmidSegment(id string) string {
	if _, ok := parseVMID(id); !ok {
		return "0"
	}
	return id
}

// parseVMID reads a VM ID written as PVE writes VMIDs: a positive decimal number without sign or
// leading zeros.
func parseVMID(id string) (int, bool) {
	n, err := strconv.Atoi(id)
	if err != nil || n <= 0 || strconv.Itoa(n) != id {
		return 0, false
	}
	return n, true
}

// vmRef is the reference of the VM a listing row or a task names.
func vmRef(node string, vmid int) hypervisor.VMRef {
	return hypervisor.VMRef{Node: node, ID: strconv.Itoa(vmid)}
}

// opName names an operation on a VM for error messages.
func opName(verb string, ref hypervisor.VMRef) string {
	return strings.TrimSpace(verb + " " + ref.String())
}
