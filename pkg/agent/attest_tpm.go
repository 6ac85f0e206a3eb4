package agent

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	agenttpm "github.com/hyperfleet-io/hyperfleet/pkg/agent/tpm"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
)

// attestTPM redeems the join token with TPM evidence, answers the credential challenge in the TPM
// and returns an SVID whose key stays in the TPM.
func (a *Agent) attestTPM(ctx context.Context) (*x509svid.SVID, error) {
	t, err := agenttpm.Open(a.cfg.TPMDevice)
	if err != nil {
		return nil, err
	}
	dev, err := agenttpm.NewDevice(t)
	if err != nil {
		return nil, err
	}
	a.tpm = dev // closed when Run ends: TLS handshakes sign with it
	ev, err := dev.Evidence(a.cfg.JoinToken)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(protocol.TPMAttestRequest{JoinToken: a.cfg.JoinToken, CSR: string(ev.CSR),
		EKPublic: ev.EKPublic, AKPublic: ev.AKPublic, KeyPublic: ev.KeyPublic,
		CertifyInfo: ev.CertifyInfo, CertifySignature: ev.CertifySignature, EKCertificate: ev.EKCertificate})
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: tlsconfig.TLSClientConfig(a.bundle, tlsconfig.AuthorizeID(a.identityForService())),
	}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(a.opts.RetryWindow)
	if exp := a.cfg.TokenExpiresAt; exp != nil && exp.Before(deadline) {
		deadline = *exp
	}
	var ch protocol.TPMChallenge
	if err := a.call(ctx, client, http.MethodPost, protocol.TPMAttestPath, body, &ch, deadline); err != nil {
		return nil, err
	}
	secret, err := dev.ActivateCredential(ch.CredentialBlob, ch.EncryptedSecret)
	if err != nil {
		return nil, &refusedError{msg: err.Error()} // not our TPM's challenge: retrying cannot help
	}
	body, _ = json.Marshal(protocol.TPMActivateRequest{ChallengeID: ch.ChallengeID, Secret: secret, State: ch.State})
	if ch.ExpiresAt.Before(deadline) {
		deadline = ch.ExpiresAt
	}
	var resp protocol.AttestResponse
	if err := a.call(ctx, client, http.MethodPost, protocol.TPMActivatePath, body, &resp, deadline); err != nil {
		return nil, err
	}
	return tpmSVID([]byte(resp.SVID), dev)
}

// tpmSVID pairs the issued chain with the TPM-resident key, checking that the leaf is for it.
func tpmSVID(chainPEM []byte, dev *agenttpm.Device) (*x509svid.SVID, error) {
	var chain []*x509.Certificate
	for rest := chainPEM; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		chain = append(chain, c)
	}
	if len(chain) == 0 || !dev.Public().Equal(chain[0].PublicKey) {
		return nil, errors.New("issued SVID is not for the TPM key")
	}
	id, err := x509svid.IDFromCert(chain[0])
	if err != nil {
		return nil, err
	}
	return &x509svid.SVID{ID: id, Certificates: chain, PrivateKey: dev.Signer()}, nil
}
