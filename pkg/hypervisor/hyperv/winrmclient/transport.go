package winrmclient

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/masterzen/winrm"
	"github.com/masterzen/winrm/soap"
)

// maxResponse bounds a response body read from a host.
const maxResponse = 32 << 20

// transport is the masterzen/winrm Transporter HyperFleet plugs in through
// Parameters.TransportDecorator. That library version has no context APIs, so every run gets its
// own transport carrying the caller's context: each HTTP exchange ends with the context or a
// little after the OperationTimeout, whichever is first, and the library's Receive loop (which
// polls again only on an OperationTimeout fault) stops at the first such error.
type transport struct {
	c    *Client
	http *http.Client
	mu   sync.Mutex
	// ctx is the caller's context, swapped for a short detached one to close the shell.
	ctx context.Context
}

var _ winrm.Transporter = (*transport)(nil)

// detach moves the transport to a context that outlives the caller's by a short deadline, for
// the requests that clean up (Signal, Delete) after the caller's context ended.
func (t *transport) detach() context.CancelFunc {
	t.mu.Lock()
	defer t.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), min(t.c.httpDeadline(), 15*time.Second))
	t.ctx = ctx
	return cancel
}

func (t *transport) context() context.Context {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ctx
}

// Transport is called by winrm.NewClientWithParameters; the HTTP client is built by New.
func (t *transport) Transport(*winrm.Endpoint) error { return nil }

var actionPattern = regexp.MustCompile(`Action[^>]*>[^<]*/([A-Za-z]+)<`)

// Post sends one SOAP message and returns the response body, or a classified error.
func (t *transport) Post(_ *winrm.Client, msg *soap.SoapMessage) (string, error) {
	body := msg.String()
	op := "WinRM request"
	if m := actionPattern.FindStringSubmatch(body); m != nil {
		op = "WinRM " + m[1]
	}
	ctx := t.context()
	if err := ctx.Err(); err != nil {
		return "", classifyTransport(op, err)
	}
	ctx, cancel := context.WithTimeout(ctx, t.c.httpDeadline())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.c.endpoint.String(), strings.NewReader(body))
	if err != nil {
		return "", classifyTransport(op, err)
	}
	req.Header.Set("Content-Type", "application/soap+xml;charset=UTF-8")
	req.SetBasicAuth(t.c.cfg.Username, t.c.cfg.Password)
	resp, err := t.http.Do(req)
	if err != nil {
		return "", classifyTransport(op, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return "", classifyTransport(op, err)
	}
	if len(data) > maxResponse {
		return "", classifyStatus(op, resp, nil, fmt.Sprintf("response larger than %d bytes", maxResponse))
	}
	if err := ctx.Err(); err != nil {
		// Whatever arrived, the caller's deadline (or this request's) has passed.
		return "", classifyTransport(op, err)
	}
	soapBody := strings.Contains(resp.Header.Get("Content-Type"), "application/soap+xml")
	if resp.StatusCode == http.StatusOK && soapBody {
		return string(data), nil
	}
	if soapBody {
		if f := parseFault(data); f != nil {
			return "", classifyFault(op, f)
		}
	}
	return "", classifyStatus(op, resp, data, "")
}

// httpDeadline is how long one HTTP exchange may take: the OperationTimeout the host honours, plus
// a margin for the answer to travel.
func (c *Client) httpDeadline() time.Duration {
	margin := min(max(c.cfg.OperationTimeout/4, 500*time.Millisecond), 10*time.Second)
	return c.cfg.OperationTimeout + margin
}

// newWinRM builds a masterzen/winrm client whose requests run under ctx.
func (c *Client) newWinRM(ctx context.Context) (*winrm.Client, *transport, error) {
	tr := &transport{c: c, ctx: ctx, http: c.acquire()}
	params := winrm.NewParameters(wsmanDuration(c.cfg.OperationTimeout), "en-US", 153600)
	params.TransportDecorator = func() winrm.Transporter { return tr }
	host, port := c.hostPort()
	ep := winrm.NewEndpoint(host, port, c.endpoint.Scheme == "https", c.cfg.InsecureSkipVerify, nil, nil, nil, c.httpDeadline())
	wc, err := winrm.NewClientWithParameters(ep, c.cfg.Username, c.cfg.Password, params)
	if err != nil {
		c.release(tr.http)
		return nil, nil, classifyTransport("configure WinRM client", err)
	}
	return wc, tr, nil
}

// wsmanDuration formats d as the xs:duration WinRM expects (PT60.000S).
func wsmanDuration(d time.Duration) string {
	return fmt.Sprintf("PT%.3fS", d.Seconds())
}
