package winrmclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// WinRM fault codes (f:WSManFault/@Code) HyperFleet tells apart.
const (
	FaultOperationTimeout   uint32 = 2150858793
	FaultShellNotFound      uint32 = 2150858843
	FaultShellQuota         uint32 = 2150859173
	FaultTooManyOperations  uint32 = 2150859174
	FaultCommandLineTooLong uint32 = 2147942606
	FaultAccessDenied       uint32 = 5
)

// Fault is a WS-Management SOAP fault from the host.
type Fault struct {
	// Code is the WSManFault code (FaultShellQuota ...); 0 when the fault carried none.
	Code uint32
	// Subcode is the SOAP subcode, e.g. w:TimedOut.
	Subcode string
	// Message is the host's text.
	Message string
}

func (f *Fault) Error() string {
	return fmt.Sprintf("WS-Management fault %d (%s): %s", f.Code, f.Subcode, f.Message)
}

// FaultCode returns the WSManFault code err carries, if any.
func FaultCode(err error) (uint32, bool) {
	var f *Fault
	if errors.As(err, &f) {
		return f.Code, true
	}
	return 0, false
}

type faultEnvelope struct {
	Body struct {
		Fault *struct {
			Subcode string `xml:"Code>Subcode>Value"`
			Reason  string `xml:"Reason>Text"`
			Detail  struct {
				WSManFault struct {
					Code    string `xml:"Code,attr"`
					Message struct {
						Inner string `xml:",innerxml"`
					} `xml:"Message"`
				} `xml:"WSManFault"`
			} `xml:"Detail"`
		} `xml:"Fault"`
	} `xml:"Body"`
}

// parseFault reads a SOAP fault body; nil when body is not one.
func parseFault(body []byte) *Fault {
	var env faultEnvelope
	if err := xml.NewDecoder(bytes.NewReader(body)).Decode(&env); err != nil || env.Body.Fault == nil {
		return nil
	}
	f := env.Body.Fault
	code, _ := strconv.ParseUint(strings.TrimSpace(f.Detail.WSManFault.Code), 10, 32)
	msg := strings.TrimSpace(textOf(f.Detail.WSManFault.Message.Inner))
	if msg == "" {
		msg = strings.TrimSpace(f.Reason)
	}
	return &Fault{Code: uint32(code), Subcode: strings.TrimSpace(f.Subcode), Message: msg}
}

// textOf returns the character data of an XML fragment (a ProviderFault wraps the message).
func textOf(fragment string) string {
	dec := xml.NewDecoder(strings.NewReader("<x>" + fragment + "</x>"))
	var b strings.Builder
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		if cd, ok := tok.(xml.CharData); ok {
			b.Write(cd)
		}
	}
	return b.String()
}

// classifyFault maps a WinRM fault to a hypervisor error class. The message keeps the host's
// text, which masterzen/winrm's Receive loop relies on: it polls again when an error mentions
// OperationTimeout.
func classifyFault(op string, f *Fault) error {
	class := hypervisor.ErrTransient
	switch {
	case f.Code == FaultCommandLineTooLong:
		class = hypervisor.ErrInvalid
	case f.Code == FaultAccessDenied || strings.HasSuffix(f.Subcode, "AccessDenied"):
		class = hypervisor.ErrForbidden
	case f.Code == FaultOperationTimeout, f.Code == FaultShellQuota, f.Code == FaultTooManyOperations,
		f.Code == FaultShellNotFound:
		// Retrying later (in a new shell) can succeed.
	}
	return &hypervisor.Error{Class: class, Op: op, Err: f}
}

// classifyStatus maps an HTTP answer without a SOAP fault.
func classifyStatus(op string, resp *http.Response, body []byte, detail string) error {
	if detail == "" {
		detail = strings.TrimSpace(string(body))
		if len(detail) > 200 {
			detail = detail[:200] + "…"
		}
	}
	class := hypervisor.ErrInvalid
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		class = hypervisor.ErrUnauthorized
		detail = "the host refused the credentials (check the user, password and the auth scheme enabled on the WinRM service)"
	case resp.StatusCode == http.StatusForbidden:
		class = hypervisor.ErrForbidden
	case resp.StatusCode < 300:
		// A success without a SOAP body: something between HyperFleet and WinRM answered, or the
		// answer was cut short.
		class = hypervisor.ErrTransient
		detail = "answer without a SOAP body (Content-Type " + resp.Header.Get("Content-Type") + ")"
	case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout:
		class = hypervisor.ErrTransient
	}
	return hypervisor.Errorf(class, op, "HTTP %d: %s", resp.StatusCode, detail)
}

// classifyTransport maps a failure to exchange a request at all.
func classifyTransport(op string, err error) error {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verification     *tls.CertificateVerificationError
	)
	switch {
	case errors.Is(err, errBasicRefused):
		return &hypervisor.Error{Class: hypervisor.ErrUnauthorized, Op: op, Err: err}
	case errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &verification):
		return &hypervisor.Error{Class: hypervisor.ErrUnauthorized, Op: op,
			Err: fmt.Errorf("the host's TLS certificate is not trusted (set the CA bundle): %w", err)}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &hypervisor.Error{Class: hypervisor.ErrTransient, Op: op, Err: fmt.Errorf("no answer in time: %w", err)}
	}
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return &hypervisor.Error{Class: hypervisor.ErrTransient, Op: op, Err: fmt.Errorf("no answer in time: %w", err)}
	}
	return &hypervisor.Error{Class: hypervisor.ErrTransient, Op: op, Err: err}
}
