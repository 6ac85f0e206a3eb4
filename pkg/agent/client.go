package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// refusedError is a definitive 4xx answer: retrying cannot help.
type refusedError struct {
	status int
	msg    string
}

func (e *refusedError) Error() string { return fmt.Sprintf("refused (%d): %s", e.status, e.msg) }

// busyError is a 429 or 503: the service asks us to come back after a while.
type busyError struct {
	status string
	after  time.Duration
}

func (e *busyError) Error() string { return fmt.Sprintf("%s: retry after %s", e.status, e.after) }

// maxRetryAfter bounds how long one Retry-After may make us wait.
const maxRetryAfter = time.Minute

// credentials are the VM's X509-SVID and the trust bundle it checks the bootstrap service with.
type credentials struct {
	svid    x509svid.Source
	bundle  x509bundle.Source
	id      spiffeid.ID
	expires time.Time
	close   func()
}

// staticCredentials are an SVID the bootstrap service issued: fixed for the VM's short life.
func (a *Agent) staticCredentials(svid *x509svid.SVID) *credentials {
	return &credentials{svid: staticSVID{svid}, bundle: a.bundle, id: svid.ID,
		expires: svid.Certificates[0].NotAfter, close: func() {}}
}

type staticSVID struct{ svid *x509svid.SVID }

func (s staticSVID) GetX509SVID() (*x509svid.SVID, error) { return s.svid, nil }

// attest obtains the VM's SVID by the configured method.
func (a *Agent) attest(ctx context.Context) (*credentials, error) {
	if a.cfg.Attestation == AttestationSPIRE {
		return a.attestSPIRE(ctx)
	}
	if a.cfg.JoinToken == "" {
		return nil, &refusedError{status: 0, msg: "no join token in the configuration"}
	}
	var svid *x509svid.SVID
	var err error
	if a.cfg.Attestation == AttestationTPM {
		svid, err = a.attestTPM(ctx)
	} else {
		svid, err = a.attestJoinToken(ctx)
	}
	if err != nil {
		return nil, err
	}
	return a.staticCredentials(svid), nil
}

// attestJoinToken redeems the join token for an SVID over server-authenticated TLS.
func (a *Agent) attestJoinToken(ctx context.Context) (*x509svid.SVID, error) {
	key, csr, err := identity.NewKeyAndCSR()
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(protocol.AttestRequest{JoinToken: a.cfg.JoinToken, CSR: string(csr)})
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: tlsconfig.TLSClientConfig(a.bundle, tlsconfig.AuthorizeID(a.identityForService())),
	}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(a.opts.RetryWindow)
	if exp := a.cfg.TokenExpiresAt; exp != nil && exp.Before(deadline) {
		deadline = *exp
	}
	var resp protocol.AttestResponse
	if err := a.call(ctx, client, http.MethodPost, protocol.AttestPath, body, &resp, deadline); err != nil {
		return nil, err
	}
	return identity.SVIDFromPEM([]byte(resp.SVID), key)
}

// mtlsClient authenticates with the VM's SVID and accepts only the bootstrap service.
func (a *Agent) mtlsClient(c *credentials) *http.Client {
	return &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{
		TLSClientConfig: tlsconfig.MTLSClientConfig(c.svid, c.bundle, tlsconfig.AuthorizeID(a.identityForService())),
	}}
}

// fetchRunnerConfig retries until the SVID expires: an expired credential ends the VM.
func (a *Agent) fetchRunnerConfig(ctx context.Context, client *http.Client, svidExpiry time.Time) (*protocol.RunnerConfig, error) {
	deadline := time.Now().Add(a.opts.RetryWindow)
	if svidExpiry.Before(deadline) {
		deadline = svidExpiry
	}
	rc := &protocol.RunnerConfig{}
	if err := a.call(ctx, client, http.MethodGet, protocol.RunnerConfigPath, nil, rc, deadline); err != nil {
		return nil, err
	}
	return rc, nil
}

// deregister asks the service to remove a runner that never took a job, best effort.
func (a *Agent) deregister(ctx context.Context, client *http.Client) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if err := a.call(ctx, client, http.MethodDelete, protocol.RunnerPath, nil, nil, time.Now().Add(30*time.Second)); err != nil {
		a.log.Warn("deregistering the runner failed; the pool's cleanup will remove it", "err", err)
		return
	}
	a.log.Info("runner deregistered")
}

// call does one request, retrying network errors, 5xx and 429 (after the Retry-After the service
// asks for) until deadline; any other 4xx is final.
func (a *Agent) call(ctx context.Context, client *http.Client, method, path string, body []byte, out any, deadline time.Time) error {
	url := strings.TrimRight(a.cfg.ServiceURL, "/") + path
	for attempt := 1; ; attempt++ {
		err := a.callOnce(ctx, client, method, url, body, out)
		if err != nil && strings.Contains(err.Error(), "remote error: tls:") {
			// The service rejected our certificate at the handshake: as final as a 401.
			err = &refusedError{msg: err.Error()}
		}
		var re *refusedError
		if err == nil || errors.As(err, &re) {
			return err
		}
		wait := a.opts.RetryInterval
		var be *busyError
		if errors.As(err, &be) {
			wait = max(wait, be.after)
		}
		if !time.Now().Add(wait).Before(deadline) {
			return fmt.Errorf("giving up after %d attempts: %w", attempt, err)
		}
		a.log.Warn("request failed; retrying", "path", path, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (a *Agent) callOnce(ctx context.Context, client *http.Client, method, url string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		after, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		return &busyError{status: resp.Status, after: min(time.Duration(max(after, 0))*time.Second, maxRetryAfter)}
	case resp.StatusCode >= 500:
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(data)))
	case resp.StatusCode >= 400:
		var perr protocol.Error
		_ = json.Unmarshal(data, &perr)
		return &refusedError{status: resp.StatusCode, msg: perr.Error}
	case out != nil && resp.StatusCode != http.StatusNoContent:
		return json.Unmarshal(data, out)
	}
	return nil
}
