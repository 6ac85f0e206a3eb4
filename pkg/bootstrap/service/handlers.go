package service

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// requestTimeout bounds one request's work, GitHub calls included.
const requestTimeout = 90 * time.Second

// handleAttest redeems a join token and signs the caller's CSR.
func (s *Server) handleAttest(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	var req protocol.AttestRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "request body is not an attest request")
		return
	}
	csr, err := identity.ParseCSRPEM([]byte(req.CSR))
	if err != nil {
		writeError(w, http.StatusBadRequest, "csr: "+err.Error())
		return
	}
	attested, err := s.opts.Attestor.Attest(ctx, identity.Evidence{JoinToken: req.JoinToken, CSR: csr})
	metrics.Attestation(attestationResult(err))
	if err != nil {
		status := attestStatus(err)
		s.log.Info("attestation refused", "status", status, "err", err.Error(), "remote", r.RemoteAddr)
		writeError(w, status, publicMessage(status, err))
		return
	}
	s.log.Info("attested", "spiffeID", attested.ID.String(), "machine", attested.Machine.Namespace+"/"+attested.Machine.Name)
	writeJSON(w, http.StatusOK, protocol.AttestResponse{
		SPIFFEID:  attested.ID.String(),
		SVID:      string(identity.EncodeCertificates(attested.Chain)),
		ExpiresAt: attested.Chain[0].NotAfter,
	})
}

// handleRunnerConfig hands a live machine its one-time runner config.
func (s *Server) handleRunnerConfig(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	id, ok := s.peerID(w, r)
	if !ok {
		return
	}
	t, err := s.resolve(ctx, id)
	if err != nil {
		s.refuse(w, r, id, err)
		return
	}
	t.cert = r.TLS.PeerCertificates[0]
	if err := s.claimRunnerConfig(ctx, t); err != nil {
		s.refuse(w, r, id, err)
		return
	}
	runners, scope, err := s.platformOf(ctx, t.pool)
	var reg platform.Registration
	if err == nil {
		pool, _ := platform.PoolOf(t.pool)
		reg, err = runners.Register(ctx, scope, platform.RunnerSpec{
			Name: t.machine.Name,
			// The pool's mark lets its repair loop tell its own stale runners from others'.
			Labels: append(slices.Clone(pool.Labels), platform.PoolRunnerLabel(string(t.pool.UID))),
		})
	}
	if err != nil {
		// Give the claim back so the VM's retry can succeed; the platform never answered it.
		s.releaseRunnerConfig(ctx, t, err)
		s.refuse(w, r, id, platformRefusal(err))
		return
	}
	if err := s.recordAttested(ctx, t); err != nil {
		// The runner is registered and the VM is genuine: hand the config out anyway, and let the
		// pool's bootstrap timeout judge a VM whose completion could not be recorded.
		s.log.Error(err, "recording attestation", "spiffeID", id.String())
	}
	s.log.Info("runner config issued", "spiffeID", id.String(), "pool", t.pool.Name)
	rc := protocol.RunnerConfig{Platform: string(runners.Kind()), RunnerName: t.machine.Name, Config: reg.Config}
	if runners.Kind() == platform.KindGitHub {
		rc.JITConfig = reg.Config // agents built before spec.platform read only this
	}
	writeJSON(w, http.StatusOK, rc)
}

// handleDeleteRunner deregisters the caller's runner, for a VM that gives up before any job.
func (s *Server) handleDeleteRunner(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	id, ok := s.peerID(w, r)
	if !ok {
		return
	}
	t, err := s.resolve(ctx, id)
	if err != nil {
		s.refuse(w, r, id, err)
		return
	}
	runners, scope, err := s.platformOf(ctx, t.pool)
	if err == nil {
		err = runners.RemoveRunnerByName(ctx, scope, t.machine.Name)
	}
	if err != nil {
		s.refuse(w, r, id, platformRefusal(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// peerID is the caller's SPIFFE ID from the certificate the handshake verified; 401 without one.
func (s *Server) peerID(w http.ResponseWriter, r *http.Request) (spiffeid.ID, bool) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		writeError(w, http.StatusUnauthorized, "this endpoint needs the X509-SVID issued at attestation (mTLS)")
		return spiffeid.ID{}, false
	}
	id, err := x509svid.IDFromCert(r.TLS.PeerCertificates[0])
	if err != nil {
		writeError(w, http.StatusUnauthorized, "client certificate is not an X509-SVID")
		return spiffeid.ID{}, false
	}
	return id, true
}

func (s *Server) refuse(w http.ResponseWriter, r *http.Request, id spiffeid.ID, err error) {
	status := http.StatusInternalServerError
	var se *statusError
	if errors.As(err, &se) {
		status = se.code
	}
	s.log.Info("request refused", "path", r.URL.Path, "spiffeID", id.String(), "status", status, "err", err.Error())
	if at, ok := platform.RetryAt(err); ok && status == http.StatusServiceUnavailable {
		// The platform rate-limited the registration: the agent waits until the limit lifts
		// instead of asking again at once (it honours Retry-After on 503).
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(time.Until(at).Seconds())))))
	}
	writeError(w, status, publicMessage(status, err))
}

// statusError carries the status code a failure is answered with.
type statusError struct {
	code int
	err  error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

func refusal(code int, err error) error { return &statusError{code: code, err: err} }

// attestOutcomes maps attestation errors to the HTTP status the VM gets and the metrics label,
// in one place so the two cannot drift apart.
var attestOutcomes = []struct {
	err    error
	status int
	result string
}{
	{identity.ErrInvalidEvidence, http.StatusUnauthorized, metrics.AttestationInvalidToken},
	{identity.ErrNotLive, http.StatusForbidden, metrics.AttestationNotLive},
	{identity.ErrAlreadyRedeemed, http.StatusConflict, metrics.AttestationTokenReused},
	{identity.ErrExpired, http.StatusGone, metrics.AttestationTokenExpired},
	{identity.ErrBadRequest, http.StatusBadRequest, metrics.AttestationBadRequest},
}

func attestStatus(err error) int {
	for _, o := range attestOutcomes {
		if errors.Is(err, o.err) {
			return o.status
		}
	}
	return http.StatusServiceUnavailable
}

// attestationResult is the metrics label of an attestation outcome.
func attestationResult(err error) string {
	if err == nil {
		return metrics.AttestationSuccess
	}
	for _, o := range attestOutcomes {
		if errors.Is(err, o.err) {
			return o.result
		}
	}
	return metrics.AttestationError
}

// platformRefusal answers a platform failure with the status platformOf already chose (503 for
// credentials or a namespace an operator must fix, so the agent retries), else by its class.
func platformRefusal(err error) error {
	var se *statusError
	if errors.As(err, &se) {
		return err
	}
	return &statusError{code: platformStatus(err), err: err}
}

func platformStatus(err error) int {
	switch {
	case errors.Is(err, platform.ErrRunnerBusy):
		return http.StatusConflict
	case platform.IsRetryable(err):
		return http.StatusServiceUnavailable
	}
	return http.StatusBadGateway
}

// publicMessage keeps internal detail (API errors, object names) out of 5xx answers.
func publicMessage(status int, err error) string {
	if status >= 500 {
		return http.StatusText(status)
	}
	return err.Error()
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, protocol.Error{Error: msg})
}
