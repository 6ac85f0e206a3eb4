package proxmox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	gpx "github.com/luthermonson/go-proxmox"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// apiError is an error response from the Proxmox API. PVE puts the error text in the HTTP reason
// phrase ("500 VM 105 is locked (clone)"); newer versions repeat it as "message" in the body, and
// parameter errors (400) come with a per-parameter "errors" map.
type apiError struct {
	Method  string
	Path    string
	Status  int
	Reason  string
	Message string
	Errors  map[string]string
}

func newAPIError(req *http.Request, res *http.Response, body []byte) *apiError {
	e := &apiError{Status: res.StatusCode, Reason: strings.TrimSpace(strings.TrimPrefix(res.Status, strconv.Itoa(res.StatusCode)))}
	if req != nil && req.URL != nil {
		e.Method = req.Method
		e.Path = req.URL.Path
		if i := strings.Index(e.Path, apiPath); i >= 0 {
			e.Path = e.Path[i+len(apiPath):]
		}
	}
	var decoded struct {
		Message string                     `json:"message"`
		Errors  map[string]json.RawMessage `json:"errors"`
	}
	if json.Unmarshal(body, &decoded) == nil {
		e.Message = strings.TrimSpace(decoded.Message)
		for k, raw := range decoded.Errors {
			if e.Errors == nil {
				e.Errors = map[string]string{}
			}
			var s string
			if json.Unmarshal(raw, &s) != nil {
				s = string(raw)
			}
			e.Errors[k] = strings.TrimSpace(s)
		}
	}
	return e
}

func (e *apiError) Error() string {
	var b strings.Builder
	if e.Method != "" {
		fmt.Fprintf(&b, "%s %s: ", e.Method, e.Path)
	}
	fmt.Fprintf(&b, "%d %s", e.Status, e.Reason)
	if e.Message != "" && !strings.Contains(e.Reason, e.Message) && !strings.Contains(e.Message, e.Reason) {
		fmt.Fprintf(&b, " (%s)", e.Message)
	}
	if len(e.Errors) > 0 {
		keys := make([]string, 0, len(e.Errors))
		for k := range e.Errors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "; %s: %s", k, e.Errors[k])
		}
	}
	return b.String()
}

// text is everything PVE said about the error, for matching.
func (e *apiError) text() string {
	parts := []string{e.Reason, e.Message}
	for _, v := range e.Errors {
		parts = append(parts, v)
	}
	return strings.Join(parts, " ")
}

// classify wraps err in a hypervisor.Error with its class; nil stays nil and classified errors
// keep their class.
func classify(op string, err error) error {
	if err == nil {
		return nil
	}
	var he *hypervisor.Error
	if errors.As(err, &he) {
		return err
	}
	return &hypervisor.Error{Class: classOf(err), Op: op, Err: err}
}

// classOf maps an error from go-proxmox or the transport to a hypervisor error class.
func classOf(err error) error {
	var ae *apiError
	if errors.As(err, &ae) {
		return classOfStatus(ae.Status, ae.text())
	}
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verification     *tls.CertificateVerificationError
	)
	switch {
	case errors.Is(err, gpx.ErrNotAuthorized):
		// With the errorTransport only a 401 gets here: go-proxmox's answer to a rejected login.
		return hypervisor.ErrUnauthorized
	case errors.As(err, &unknownAuthority), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &verification):
		// A certificate we cannot trust will not become trustworthy by retrying; the fix is the
		// CA bundle, next to the credentials.
		return hypervisor.ErrUnauthorized
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// A connection closed without an answer: what a saturated pveproxy does to the calls it
		// cannot queue.
		return hypervisor.ErrOverloaded
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled), errors.Is(err, gpx.ErrTimeout),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE):
		return hypervisor.ErrTransient
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return hypervisor.ErrTransient
	}
	return classOfText(err.Error())
}

// goProxmoxStatus matches the error strings go-proxmox builds itself: "500 VM 105 is locked
// (clone)" for 500/501 and "bad request: 400 Parameter verification failed. - {...}" for 400.
var goProxmoxStatus = regexp.MustCompile(`^(?:bad request: )?(\d{3}) (.*)$`)

func classOfText(msg string) error {
	if m := goProxmoxStatus.FindStringSubmatch(msg); m != nil {
		code, _ := strconv.Atoi(m[1])
		return classOfStatus(code, m[2])
	}
	if c := classOfMessage(msg); c != nil {
		return c
	}
	if strings.Contains(strings.ToLower(msg), "not authorized") {
		return hypervisor.ErrUnauthorized
	}
	return hypervisor.ErrTransient
}

func classOfStatus(status int, text string) error {
	switch {
	case status == http.StatusBadRequest:
		// Parameter errors name the parameter's problem: {"vmid": "VM 200 already exists"},
		// {"upid": "no such task"}.
		if c := classOfMessage(text); c == hypervisor.ErrAlreadyExists || c == hypervisor.ErrNotFound {
			return c
		}
		return hypervisor.ErrInvalid
	case status == http.StatusUnauthorized:
		return hypervisor.ErrUnauthorized
	case status == http.StatusForbidden:
		return hypervisor.ErrForbidden
	case status == http.StatusNotFound:
		return hypervisor.ErrNotFound
	case status == http.StatusServiceUnavailable:
		return hypervisor.ErrOverloaded
	case status == http.StatusNotImplemented:
		// "Method 'GET /foo' not implemented": a wrong path or an older PVE, not a passing fault.
		return hypervisor.ErrInvalid
	case status >= 500:
		if c := classOfMessage(text); c != nil {
			return c
		}
		return hypervisor.ErrTransient
	default:
		return hypervisor.ErrInvalid
	}
}

// classOfMessage recognises PVE's error texts, which are the same whatever status carries them.
func classOfMessage(text string) error {
	t := strings.ToLower(text)
	switch {
	case strings.Contains(t, "already exists"), strings.Contains(t, "already defined"):
		// PVE's SDN and storage configs say "object ID 'x' already defined".
		return hypervisor.ErrAlreadyExists
	case strings.Contains(t, "does not exist"), strings.Contains(t, "no such"):
		return hypervisor.ErrNotFound
	case strings.Contains(t, "can't lock file") && strings.Contains(t, "got timeout"):
		return hypervisor.ErrLockTimeout
	case strings.Contains(t, "is locked"), strings.Contains(t, "can't lock file"), strings.Contains(t, "is running"),
		strings.Contains(t, "not running"), strings.Contains(t, "timeout while waiting"), strings.Contains(t, "got timeout"):
		return hypervisor.ErrBusy
	case strings.Contains(t, "permission check failed"):
		return hypervisor.ErrForbidden
	case strings.Contains(t, "missing replicate feature"):
		// A volume on a storage that cannot replicate (anything but ZFS) stays so.
		return hypervisor.ErrInvalid
	case strings.Contains(t, "can't migrate"), strings.Contains(t, "target is local node"):
		// qemu-server's migration refusals ("can't migrate running VM without --online") hold
		// until the request changes.
		return hypervisor.ErrInvalid
	}
	return nil
}

// errorText is PVE's own wording of err, for matching specific conditions.
func errorText(err error) string {
	var ae *apiError
	if errors.As(err, &ae) {
		return strings.ToLower(ae.text())
	}
	if err == nil {
		return ""
	}
	return strings.ToLower(err.Error())
}
