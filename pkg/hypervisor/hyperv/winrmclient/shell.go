package winrmclient

import (
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/masterzen/winrm"
	"github.com/masterzen/winrm/soap"
)

// ShellIdleTimeout is how long the host keeps one of this client's shells after its last request.
// masterzen/winrm opens shells with the host's own IdleTimeout (two hours by default): a manager
// killed mid-run would leave its open shells counted against the user's quota for that long, and
// a few restarts would lock HyperFleet out of the host. Every shell asks for Config's
// ShellIdleTimeout instead, by default the longer of minShellIdleTimeout and twice the
// OperationTimeout (a running command is polled at least once per OperationTimeout, so a live
// shell never idles that long); the host grants at most its own setting.
func (c *Client) ShellIdleTimeout() time.Duration {
	if c.cfg.ShellIdleTimeout > 0 {
		return c.cfg.ShellIdleTimeout
	}
	return max(minShellIdleTimeout, 2*c.cfg.OperationTimeout)
}

const minShellIdleTimeout = 2 * time.Minute

// createShell opens a cmd shell as masterzen/winrm's CreateShell does, with an IdleTimeOut: the
// library's request has no room for one.
func (c *Client) createShell(wc *winrm.Client, tr *transport) (*winrm.Shell, error) {
	host, port := c.hostPort()
	scheme := "http"
	if c.endpoint.Scheme == "https" {
		scheme = "https"
	}
	msg := soap.NewMessage()
	msg.Header().
		To(fmt.Sprintf("%s://%s:%d/wsman", scheme, host, port)).
		ReplyTo("http://schemas.xmlsoap.org/ws/2004/08/addressing/role/anonymous").
		MaxEnvelopeSize(wc.Parameters.EnvelopeSize).
		Id("uuid:" + uuid.NewString()).
		Locale(wc.Parameters.Locale).
		Timeout(wc.Parameters.Timeout).
		Action("http://schemas.xmlsoap.org/ws/2004/09/transfer/Create").
		ResourceURI("http://schemas.microsoft.com/wbem/wsman/1/windows/shell/cmd").
		AddOption(soap.NewHeaderOption("WINRS_NOPROFILE", "FALSE")).
		AddOption(soap.NewHeaderOption("WINRS_CODEPAGE", "65001")).
		Build()
	// MS-WSMV's Shell type orders IdleTimeOut before the streams, as hosts echo it back.
	body := msg.CreateBodyElement("Shell", soap.DOM_NS_WIN_SHELL)
	msg.CreateElement(body, "IdleTimeOut", soap.DOM_NS_WIN_SHELL).SetContent(wsmanDuration(c.ShellIdleTimeout()))
	msg.CreateElement(body, "InputStreams", soap.DOM_NS_WIN_SHELL).SetContent("stdin")
	msg.CreateElement(body, "OutputStreams", soap.DOM_NS_WIN_SHELL).SetContent("stdout stderr")
	resp, err := tr.Post(wc, msg)
	if err != nil {
		return nil, err
	}
	id, err := winrm.ParseOpenShellResponse(resp)
	if err != nil {
		return nil, classifyTransport("WinRM Create", err)
	}
	return wc.NewShell(id), nil
}
