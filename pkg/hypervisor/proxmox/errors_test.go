package proxmox

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/url"
	"syscall"
	"testing"

	gpx "github.com/luthermonson/go-proxmox"
	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// TestClassify covers the error texts PVE and go-proxmox really produce, in both the structured
// form the errorTransport builds and the raw strings go-proxmox returns without it.
func TestClassify(t *testing.T) {
	api := func(status int, reason string, errs map[string]string) error {
		return &url.Error{Op: "Post", URL: "https://pve:8006/api2/json/x", Err: &apiError{Method: "POST", Path: "/x", Status: status, Reason: reason, Errors: errs}}
	}
	for _, tc := range []struct {
		name string
		err  error
		want error
	}{
		{"clone lock", api(500, "VM 105 is locked (clone)", nil), hypervisor.ErrBusy},
		{"config lock timeout", api(500, "can't lock file '/var/lock/qemu-server/lock-105.conf' - got timeout", nil), hypervisor.ErrLockTimeout},
		{"destroy running", api(500, "VM 105 is running - destroy failed", nil), hypervisor.ErrBusy},
		{"timeout while waiting", api(500, "timeout while waiting for the VM to stop", nil), hypervisor.ErrBusy},
		{"missing config", api(500, "Configuration file 'nodes/pve1/qemu-server/105.conf' does not exist", nil), hypervisor.ErrNotFound},
		{"no such task", api(500, "unable to open file '/var/log/pve/tasks/X' - No such file or directory", nil), hypervisor.ErrNotFound},
		{"clone collision", api(500, "unable to create VM 105: config file already exists", nil), hypervisor.ErrAlreadyExists},
		{"nextid taken", api(400, "Parameter verification failed.", map[string]string{"vmid": "VM 200 already exists"}), hypervisor.ErrAlreadyExists},
		{"unknown task", api(400, "Parameter verification failed.", map[string]string{"upid": "no such task"}), hypervisor.ErrNotFound},
		{"bad parameter", api(400, "Parameter verification failed.", map[string]string{"memory": "type check ('integer') failed - got 'lots'"}), hypervisor.ErrInvalid},
		{"auth failure", api(401, "authentication failure", nil), hypervisor.ErrUnauthorized},
		{"no ticket", api(401, "No ticket", nil), hypervisor.ErrUnauthorized},
		{"permission", api(403, "Permission check failed (/vms/105, VM.Config.Options)", nil), hypervisor.ErrForbidden},
		{"not found", api(404, "Not Found", nil), hypervisor.ErrNotFound},
		{"not implemented", api(501, "Method 'GET /nodes/pve1/foo' not implemented", nil), hypervisor.ErrInvalid},
		{"internal", api(500, "Internal Server Error", nil), hypervisor.ErrTransient},
		{"bad gateway", api(502, "Bad Gateway", nil), hypervisor.ErrTransient},
		{"node unreachable", api(595, "No route to host", nil), hypervisor.ErrTransient},
		{"proxy timeout", api(596, "Connection timed out", nil), hypervisor.ErrTransient},
		{"gp 500 text", errors.New("500 VM 105 is locked (clone)"), hypervisor.ErrBusy},
		{"gp 500 generic", errors.New("500 Internal Server Error"), hypervisor.ErrTransient},
		{"gp 501 text", errors.New("501 Method 'GET /x' not implemented"), hypervisor.ErrInvalid},
		{"gp 400 exists", errors.New(`bad request: 400 Parameter verification failed. - {"vmid":"VM 200 already exists\n"}`), hypervisor.ErrAlreadyExists},
		{"gp 400 invalid", errors.New(`bad request: 400 Parameter verification failed. - {"cores":"value must have a minimum value of 1\n"}`), hypervisor.ErrInvalid},
		{"gp not authorized", fmt.Errorf("get: %w", gpx.ErrNotAuthorized), hypervisor.ErrUnauthorized},
		{"gp timeout", gpx.ErrTimeout, hypervisor.ErrTransient},
		{"deadline", &url.Error{Op: "Get", URL: "u", Err: context.DeadlineExceeded}, hypervisor.ErrTransient},
		{"refused", &url.Error{Op: "Get", URL: "u", Err: syscall.ECONNREFUSED}, hypervisor.ErrTransient},
		{"reset", &url.Error{Op: "Get", URL: "u", Err: syscall.ECONNRESET}, hypervisor.ErrOverloaded},
		{"eof", &url.Error{Op: "Get", URL: "u", Err: io.EOF}, hypervisor.ErrOverloaded},
		{"service unavailable", api(503, "Service Unavailable", nil), hypervisor.ErrOverloaded},
		{"unknown CA", &url.Error{Op: "Get", URL: "u", Err: x509.UnknownAuthorityError{}}, hypervisor.ErrUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := classify("op", tc.err)
			g.Expect(err).To(MatchError(tc.want))
			g.Expect(errors.Is(err, tc.err)).To(BeTrue(), "the original error stays reachable")
			g.Expect(hypervisor.IsRetryable(err)).To(Equal(tc.want == hypervisor.ErrBusy || tc.want == hypervisor.ErrTransient ||
				tc.want == hypervisor.ErrLockTimeout || tc.want == hypervisor.ErrOverloaded))
			g.Expect(hypervisor.IsOverload(err)).To(Equal(tc.want == hypervisor.ErrLockTimeout || tc.want == hypervisor.ErrOverloaded))
		})
	}
}

func TestClassifyKeepsClassifiedErrors(t *testing.T) {
	g := NewWithT(t)
	orig := hypervisor.Errorf(hypervisor.ErrNotOwned, "stop", "foreign")
	g.Expect(classify("outer", orig)).To(BeIdenticalTo(orig))
	g.Expect(classify("op", nil)).To(BeNil())
}

func TestTaskExitStatus(t *testing.T) {
	u := upid{node: "pve1", kind: "qmclone", id: "9000"}
	for _, tc := range []struct {
		exit string
		ok   bool
	}{{"OK", true}, {"WARNINGS: 2", true}, {"clone failed: storage full", false}, {"", false}, {"VM 9000 already running", false}} {
		t.Run(tc.exit, func(t *testing.T) {
			g := NewWithT(t)
			err := taskError(u, tc.exit)
			if tc.ok {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(hypervisor.ErrTaskFailed))
			g.Expect(hypervisor.IsOverload(err)).To(BeFalse())
		})
	}
	// A clone that waited for its storage's lock in vain failed for the load, not for the VM.
	err := taskError(u, "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout")
	NewWithT(t).Expect(err).To(MatchError(hypervisor.ErrTaskFailed))
	NewWithT(t).Expect(err).To(MatchError(hypervisor.ErrLockTimeout))
	NewWithT(t).Expect(hypervisor.IsOverload(err)).To(BeTrue())
}
