package hvsim

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rc4" //nolint:staticcheck // NTLM seals with RC4 by definition (MS-NLMP 3.4.3).
	"encoding/binary"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// NTLM session security (MS-NLMP 3.4) and WS-Management's encrypted messages (MS-WSMV 2.2.9.1.1):
// what WinRM over HTTP requires by default, and what pywinrm's message_encryption sends. After an
// NTLMv2 authentication that negotiated SEAL, each request body is multipart/encrypted with
// protocol application/HTTP-SPNEGO-session-encrypted: a part naming the original length, then the
// 4-byte signature length, the 16-byte signature and the sealed SOAP envelope. The simulator
// unseals and verifies it with the client-to-server keys and seals its answer with the
// server-to-client keys, each direction with its own RC4 stream and sequence numbers.

// Flags the CHALLENGE offers only to a client whose NEGOTIATE asked for them, as Windows does.
const (
	flagSign    = 1 << 4
	flagSeal    = 1 << 5
	flagKeyExch = 1 << 30
)

const encryptedProtocol = "application/HTTP-SPNEGO-session-encrypted"

var (
	mimeBoundary    = []byte("--Encrypted Boundary")
	errBadSignature = errors.New("the message's NTLM signature does not verify")
)

// ntlmSession holds one authenticated connection's sealing state.
type ntlmSession struct {
	mu                     sync.Mutex
	keyExch                bool
	clientSign, serverSign []byte
	clientSeal, serverSeal *rc4.Cipher
	inSeq, outSeq          uint32
}

// newNTLMSession derives the signing and sealing keys from the exported session key (MS-NLMP
// 3.4.5.2 and 3.4.5.3, extended session security, 128-bit).
func newNTLMSession(exported []byte, keyExch bool) *ntlmSession {
	key := func(magic string) []byte {
		sum := md5.Sum(append(append([]byte(nil), exported...), magic...))
		return sum[:]
	}
	clientSeal, _ := rc4.NewCipher(key("session key to client-to-server sealing key magic constant\x00"))
	serverSeal, _ := rc4.NewCipher(key("session key to server-to-client sealing key magic constant\x00"))
	return &ntlmSession{
		keyExch:    keyExch,
		clientSign: key("session key to client-to-server signing key magic constant\x00"),
		serverSign: key("session key to server-to-client signing key magic constant\x00"),
		clientSeal: clientSeal, serverSeal: serverSeal,
	}
}

// checksum is the signature's 8-byte MAC of a message under sequence number seq; with key
// exchange it is sealed with the direction's RC4 stream, right after the message.
func (n *ntlmSession) checksum(signKey []byte, stream *rc4.Cipher, seq uint32, plain []byte) []byte {
	s := binary.LittleEndian.AppendUint32(nil, seq)
	sum := hmacMD5(signKey, s, plain)[:8]
	if n.keyExch {
		stream.XORKeyStream(sum, sum)
	}
	return sum
}

// unwrap unseals a client's message and verifies its signature (version 1, checksum, sequence).
func (n *ntlmSession) unwrap(sealed, signature []byte) ([]byte, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(signature) != 16 || binary.LittleEndian.Uint32(signature) != 1 {
		return nil, errBadSignature
	}
	plain := make([]byte, len(sealed))
	n.clientSeal.XORKeyStream(plain, sealed)
	want := n.checksum(n.clientSign, n.clientSeal, n.inSeq, plain)
	if !hmac.Equal(want, signature[4:12]) || binary.LittleEndian.Uint32(signature[12:]) != n.inSeq {
		return nil, errBadSignature
	}
	n.inSeq++
	return plain, nil
}

// wrap seals the server's message and signs it.
func (n *ntlmSession) wrap(plain []byte) (sealed, signature []byte) {
	n.mu.Lock()
	defer n.mu.Unlock()
	sealed = make([]byte, len(plain))
	n.serverSeal.XORKeyStream(sealed, plain)
	signature = binary.LittleEndian.AppendUint32(nil, 1)
	signature = append(signature, n.checksum(n.serverSign, n.serverSeal, n.outSeq, plain)...)
	signature = binary.LittleEndian.AppendUint32(signature, n.outSeq)
	n.outSeq++
	return sealed, signature
}

// isEncrypted says whether a request's Content-Type is WS-Management's encrypted message.
func isEncrypted(contentType string) bool {
	mt, params, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "multipart/encrypted" && strings.EqualFold(params["protocol"], encryptedProtocol)
}

// openEncrypted returns the SOAP envelope an encrypted request body carries.
func openEncrypted(sess *ntlmSession, body []byte) ([]byte, error) {
	parts := bytes.Split(body, append(append([]byte(nil), mimeBoundary...), '\r', '\n'))
	var fields [][]byte
	for _, p := range parts {
		if len(bytes.TrimSpace(p)) > 0 {
			fields = append(fields, p)
		}
	}
	if len(fields) != 2 {
		return nil, fmt.Errorf("an encrypted message has 2 parts, not %d", len(fields))
	}
	_, lengthText, ok := bytes.Cut(fields[0], []byte("Length="))
	if !ok || !bytes.Contains(fields[0], []byte(encryptedProtocol)) {
		return nil, errors.New("the first part names no protocol and original length")
	}
	length, err := strconv.Atoi(string(bytes.TrimSpace(lengthText)))
	if err != nil {
		return nil, fmt.Errorf("original length: %w", err)
	}
	payload, ok := bytes.CutPrefix(fields[1], []byte("\tContent-Type: application/octet-stream\r\n"))
	if !ok {
		return nil, errors.New("the second part is not application/octet-stream")
	}
	payload = bytes.TrimSuffix(payload, append(append([]byte(nil), mimeBoundary...), "--\r\n"...))
	if len(payload) < 4 {
		return nil, errors.New("no signature")
	}
	sigLen := int(binary.LittleEndian.Uint32(payload))
	if sigLen != 16 || len(payload) < 4+sigLen {
		return nil, errors.New("bad signature length")
	}
	plain, err := sess.unwrap(payload[4+sigLen:], payload[4:4+sigLen])
	if err != nil {
		return nil, err
	}
	if len(plain) != length {
		return nil, fmt.Errorf("the message is %d bytes, its header says %d", len(plain), length)
	}
	return plain, nil
}

// sealEncrypted builds the encrypted body of an answer.
func sealEncrypted(sess *ntlmSession, contentType string, plain []byte) []byte {
	sealed, signature := sess.wrap(plain)
	var b bytes.Buffer
	b.Write(mimeBoundary)
	b.WriteString("\r\n\tContent-Type: " + encryptedProtocol + "\r\n")
	fmt.Fprintf(&b, "\tOriginalContent: type=%s;Length=%d\r\n", contentType, len(plain))
	b.Write(mimeBoundary)
	b.WriteString("\r\n\tContent-Type: application/octet-stream\r\n")
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(signature))))
	b.Write(signature)
	b.Write(sealed)
	b.Write(mimeBoundary)
	b.WriteString("--\r\n")
	return b.Bytes()
}

// sealingWriter holds an answer to an encrypted request and seals its SOAP body when done.
type sealingWriter struct {
	w      http.ResponseWriter
	sess   *ntlmSession
	header http.Header
	status int
	body   bytes.Buffer
}

func newSealingWriter(w http.ResponseWriter, sess *ntlmSession) *sealingWriter {
	return &sealingWriter{w: w, sess: sess, header: http.Header{}}
}

func (s *sealingWriter) Header() http.Header { return s.header }

func (s *sealingWriter) WriteHeader(status int) {
	if s.status == 0 {
		s.status = status
	}
}

func (s *sealingWriter) Write(b []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	return s.body.Write(b)
}

// finish sends the answer: a SOAP body sealed, anything else (an HTTP error) as it is.
func (s *sealingWriter) finish() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	ct := s.header.Get("Content-Type")
	for k, v := range s.header {
		s.w.Header()[k] = v
	}
	body := s.body.Bytes()
	if strings.HasPrefix(strings.ToLower(ct), "application/soap+xml") {
		body = sealEncrypted(s.sess, ct, body)
		s.w.Header().Set("Content-Type", `multipart/encrypted;protocol="`+encryptedProtocol+`";boundary="Encrypted Boundary"`)
	}
	s.w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	s.w.WriteHeader(s.status)
	_, _ = s.w.Write(body)
}
