package service

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/tpm"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
)

// TPMAttestor runs the two steps of TPM attestation (tpm.Attestor).
type TPMAttestor interface {
	Challenge(ctx context.Context, joinToken string, ev *protocol.TPMEvidence) (*tpm.Challenge, error)
	Activate(ctx context.Context, challengeID string, state, secret []byte) (*identity.Attested, error)
}

// handleTPMAttest redeems a join token presented with TPM evidence and returns the challenge.
func (s *Server) handleTPMAttest(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	var req protocol.TPMAttestRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "request body is not a TPM attest request")
		return
	}
	ch, err := s.opts.TPM.Challenge(ctx, req.JoinToken, &protocol.TPMEvidence{
		CSR: []byte(req.CSR), EKPublic: req.EKPublic, AKPublic: req.AKPublic, KeyPublic: req.KeyPublic,
		CertifyInfo: req.CertifyInfo, CertifySignature: req.CertifySignature, EKCertificate: req.EKCertificate,
	})
	if err != nil {
		metrics.Attestation(attestationResult(err))
		status := attestStatus(err)
		s.log.Info("TPM attestation refused", "status", status, "err", err.Error(), "remote", r.RemoteAddr)
		writeError(w, status, publicMessage(status, err))
		return
	}
	writeJSON(w, http.StatusOK, protocol.TPMChallenge{ChallengeID: ch.ID, CredentialBlob: ch.CredentialBlob,
		EncryptedSecret: ch.EncryptedSecret, ExpiresAt: ch.ExpiresAt, State: ch.State})
}

// handleTPMActivate checks the answer to a challenge and issues the SVID.
func (s *Server) handleTPMActivate(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	var req protocol.TPMActivateRequest
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<10)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "request body is not a TPM activate request")
		return
	}
	attested, err := s.opts.TPM.Activate(ctx, req.ChallengeID, req.State, req.Secret)
	metrics.Attestation(attestationResult(err))
	if err != nil {
		status := attestStatus(err)
		s.log.Info("TPM attestation refused", "status", status, "err", err.Error(), "remote", r.RemoteAddr)
		writeError(w, status, publicMessage(status, err))
		return
	}
	s.log.Info("attested with TPM", "spiffeID", attested.ID.String(), "machine", attested.Machine.Namespace+"/"+attested.Machine.Name)
	writeJSON(w, http.StatusOK, protocol.AttestResponse{
		SPIFFEID:  attested.ID.String(),
		SVID:      string(identity.EncodeCertificates(attested.Chain)),
		ExpiresAt: attested.Chain[0].NotAfter,
	})
}
