package hvsim

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/go-ntlmssp"
	. "github.com/onsi/gomega"
	//lint:ignore SA1019 NTLM's NT hash is MD4 by definition.
	"golang.org/x/crypto/md4"
)

// negotiateWith sends a NEGOTIATE message and returns the server's CHALLENGE.
func (c *ntlmConn) negotiateWith(neg []byte) []byte {
	c.t.Helper()
	resp := c.post("Negotiate " + base64.StdEncoding.EncodeToString(neg))
	_, token, _ := strings.Cut(resp.Header.Get("WWW-Authenticate"), " ")
	msg, err := base64.StdEncoding.DecodeString(token)
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		c.t.Fatalf("negotiate: %d %v", resp.StatusCode, err)
	}
	return msg
}

// authenticateWithMIC builds an NTLMv2 AUTHENTICATE message by hand, as clients that protect
// their messages do (pyspnego, SSPI): MsvAvFlags says a MIC is present, and the MIC is the
// HMAC-MD5 under the exported session key of micOver and the message itself, MIC zeroed.
func authenticateWithMIC(t *testing.T, micOver, challenge []byte, user, password string) []byte {
	t.Helper()
	serverChallenge := challenge[24:32]
	info, ok := readVarField(challenge, 40)
	if !ok {
		t.Fatal("challenge without target info")
	}
	var pairs bytes.Buffer
	for p := info; len(p) >= 4; {
		id, n := binary.LittleEndian.Uint16(p), int(binary.LittleEndian.Uint16(p[2:]))
		if id == 0 {
			break
		}
		pairs.Write(p[:4+n])
		p = p[4+n:]
	}
	_ = binary.Write(&pairs, binary.LittleEndian, []uint16{6, 4})
	_ = binary.Write(&pairs, binary.LittleEndian, uint32(avFlagMIC))
	pairs.Write(make([]byte, 4)) // MsvAvEOL

	blob := []byte{1, 1, 0, 0, 0, 0, 0, 0}
	blob = append(blob, make([]byte, 8)...) // timestamp: the server does not check it
	clientChallenge := make([]byte, 8)
	_, _ = rand.Read(clientChallenge)
	blob = append(blob, clientChallenge...)
	blob = append(blob, 0, 0, 0, 0)
	blob = append(blob, pairs.Bytes()...)
	blob = append(blob, 0, 0, 0, 0)

	nt := md4.New()
	nt.Write(utf16le(password))
	v2Hash := hmacMD5(nt.Sum(nil), utf16le(strings.ToUpper(user)))
	proof := hmacMD5(v2Hash, serverChallenge, blob)
	ntResp := append(proof, blob...)
	exported := hmacMD5(v2Hash, proof)

	userRaw := utf16le(user)
	const header = 88
	msg := make([]byte, header)
	copy(msg, ntlmSignature)
	binary.LittleEndian.PutUint32(msg[8:], 3)
	field := func(at, length, offset int) {
		binary.LittleEndian.PutUint16(msg[at:], uint16(length))
		binary.LittleEndian.PutUint16(msg[at+2:], uint16(length))
		binary.LittleEndian.PutUint32(msg[at+4:], uint32(offset))
	}
	field(12, 0, header)                        // LmChallengeResponse
	field(20, len(ntResp), header)              // NtChallengeResponse
	field(28, 0, header+len(ntResp))            // DomainName
	field(36, len(userRaw), header+len(ntResp)) // UserName
	field(44, 0, header+len(ntResp)+len(userRaw))
	field(52, 0, header+len(ntResp)+len(userRaw))
	binary.LittleEndian.PutUint32(msg[60:], flagUnicode|flagNTLM|flagAlwaysSign|flagExtendedSecure|flag128|flag56)
	msg = append(msg, ntResp...)
	msg = append(msg, userRaw...)
	copy(msg[micOffset:], hmacMD5(exported, micOver, msg))
	return msg
}

// TestNTLMChecksTheMIC: a client that says its AUTHENTICATE carries a MIC is held to it, as
// Windows holds it: the right MIC authenticates; a MIC that does not match the messages the server
// exchanged (a flipped byte, or a NEGOTIATE that a man in the middle changed on its way) is
// refused. A client that sends no MIC is not asked for one.
func TestNTLMChecksTheMIC(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, Options{TLS: true, DisableBasic: true})
	neg, err := ntlmssp.NewNegotiateMessage("", "")
	g.Expect(err).NotTo(HaveOccurred())

	a := newNTLMConn(t, s)
	ch := a.negotiateWith(neg)
	good := authenticateWithMIC(t, append(bytes.Clone(neg), ch...), ch, testUser, testPassword)
	g.Expect(a.post("Negotiate " + base64.StdEncoding.EncodeToString(good)).StatusCode).To(Equal(http.StatusOK))

	b := newNTLMConn(t, s)
	ch = b.negotiateWith(neg)
	flipped := authenticateWithMIC(t, append(bytes.Clone(neg), ch...), ch, testUser, testPassword)
	flipped[micOffset] ^= 1
	g.Expect(b.post("Negotiate " + base64.StdEncoding.EncodeToString(flipped)).StatusCode).To(Equal(http.StatusUnauthorized))

	// The client asked for sealing; a man in the middle removed the flag before the server saw
	// it. The client's MIC covers the NEGOTIATE it sent, so the server notices.
	asked := bytes.Clone(neg)
	binary.LittleEndian.PutUint32(asked[12:], binary.LittleEndian.Uint32(asked[12:])|flagSign|flagSeal)
	c := newNTLMConn(t, s)
	ch = c.negotiateWith(neg)
	stripped := authenticateWithMIC(t, append(asked, ch...), ch, testUser, testPassword)
	g.Expect(c.post("Negotiate " + base64.StdEncoding.EncodeToString(stripped)).StatusCode).To(Equal(http.StatusUnauthorized))

	// go-ntlmssp sends no MIC (and says so): accepted, as Windows accepts it.
	d := newNTLMConn(t, s)
	g.Expect(d.post(authenticate(t, d.challenge(), testUser, testPassword)).StatusCode).To(Equal(http.StatusOK))
}
