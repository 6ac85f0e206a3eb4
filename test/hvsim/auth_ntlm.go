package hvsim

import (
	"bytes"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/rc4" //nolint:staticcheck // NTLM seals with RC4 by definition (MS-NLMP 3.4.3).
	"encoding/binary"
	"strings"
	"time"
	"unicode/utf16"

	//lint:ignore SA1019 NTLM's NT hash is MD4 by definition.
	"golang.org/x/crypto/md4"
)

// The server side of NTLMv2 (MS-NLMP): NEGOTIATE (type 1) is answered with a CHALLENGE (type 2)
// carrying a fresh 8-byte server challenge, and the AUTHENTICATE (type 3) is accepted only when its
// NTProofStr is the HMAC-MD5 of that challenge and the client blob under the NTLMv2 hash of the
// configured password. The challenge is used once: a replayed AUTHENTICATE fails.

const ntlmTargetName = "HVSIM"

// Negotiate flags (MS-NLMP 2.2.2.5) the challenge always offers: NTLMv2 only, never LM_KEY. SIGN,
// SEAL and KEY_EXCH (auth_seal.go) are offered to a client whose NEGOTIATE asks for them.
const (
	flagUnicode        = 1 << 0
	flagRequestTarget  = 1 << 2
	flagNTLM           = 1 << 9
	flagAlwaysSign     = 1 << 15
	flagTargetDomain   = 1 << 16
	flagExtendedSecure = 1 << 19
	flagTargetInfo     = 1 << 23
	flag128            = 1 << 29
	flag56             = 1 << 31
)

var ntlmSignature = []byte("NTLMSSP\x00")

func ntlmMessageType(msg []byte) uint32 {
	if len(msg) < 12 || !bytes.Equal(msg[:8], ntlmSignature) {
		return 0
	}
	return binary.LittleEndian.Uint32(msg[8:12])
}

func utf16le(s string) []byte {
	units := utf16.Encode([]rune(s))
	b := make([]byte, 2*len(units))
	for i, u := range units {
		binary.LittleEndian.PutUint16(b[2*i:], u)
	}
	return b
}

func fromUTF16le(b []byte) string {
	units := make([]uint16, len(b)/2)
	for i := range units {
		units[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return string(utf16.Decode(units))
}

// ntlmChallenge answers a NEGOTIATE message with a CHALLENGE and remembers its server challenge
// and the flags it offered on the connection.
func (s *Server) ntlmChallenge(cs *connState, negotiate []byte) ([]byte, error) {
	offered := uint32(flagUnicode | flagRequestTarget | flagNTLM | flagAlwaysSign | flagTargetDomain |
		flagExtendedSecure | flagTargetInfo | flag128 | flag56)
	if len(negotiate) >= 16 {
		offered |= binary.LittleEndian.Uint32(negotiate[12:]) & (flagSign | flagSeal | flagKeyExch)
	}
	challenge := make([]byte, 8)
	if _, err := rand.Read(challenge); err != nil {
		return nil, err
	}
	target := utf16le(ntlmTargetName)
	var info bytes.Buffer
	av := func(id uint16, value []byte) {
		_ = binary.Write(&info, binary.LittleEndian, id)
		_ = binary.Write(&info, binary.LittleEndian, uint16(len(value)))
		info.Write(value)
	}
	av(2, target)                // MsvAvNbDomainName
	av(1, target)                // MsvAvNbComputerName
	av(4, utf16le("hvsim.test")) // MsvAvDnsDomainName
	av(3, utf16le("localhost"))  // MsvAvDnsComputerName
	ft := make([]byte, 8)        // MsvAvTimestamp, a FILETIME
	binary.LittleEndian.PutUint64(ft, uint64(time.Now().UnixNano()/100)+116444736000000000)
	av(7, ft)
	av(0, nil) // MsvAvEOL

	const header = 48
	var m bytes.Buffer
	m.Write(ntlmSignature)
	_ = binary.Write(&m, binary.LittleEndian, uint32(2))
	varField(&m, len(target), header)
	_ = binary.Write(&m, binary.LittleEndian, offered)
	m.Write(challenge)
	m.Write(make([]byte, 8))
	varField(&m, info.Len(), header+len(target))
	m.Write(target)
	m.Write(info.Bytes())

	cs.mu.Lock()
	cs.challenge, cs.offered = challenge, offered
	cs.messages = append(bytes.Clone(negotiate), m.Bytes()...)
	cs.user, cs.session = "", nil
	cs.mu.Unlock()
	return m.Bytes(), nil
}

func varField(b *bytes.Buffer, length, offset int) {
	_ = binary.Write(b, binary.LittleEndian, uint16(length))
	_ = binary.Write(b, binary.LittleEndian, uint16(length))
	_ = binary.Write(b, binary.LittleEndian, uint32(offset))
}

// readVarField returns the payload a security buffer at msg[at:] points to, bounds-checked.
func readVarField(msg []byte, at int) ([]byte, bool) {
	if len(msg) < at+8 {
		return nil, false
	}
	n := int(binary.LittleEndian.Uint16(msg[at:]))
	off := int(binary.LittleEndian.Uint32(msg[at+4:]))
	if off < 0 || n < 0 || off > len(msg) || n > len(msg)-off {
		return nil, false
	}
	return msg[off : off+n], true
}

// ntlmAuthenticate verifies an AUTHENTICATE message against the connection's pending challenge,
// which it consumes whatever the outcome.
func (s *Server) ntlmAuthenticate(cs *connState, msg []byte) (string, bool) {
	cs.mu.Lock()
	challenge, offered, messages := cs.challenge, cs.offered, cs.messages
	cs.challenge, cs.messages = nil, nil
	cs.mu.Unlock()
	if challenge == nil || len(msg) < 64 {
		return "", false
	}
	ntResp, ok1 := readVarField(msg, 20)
	domainRaw, ok2 := readVarField(msg, 28)
	userRaw, ok3 := readVarField(msg, 36)
	flags := binary.LittleEndian.Uint32(msg[60:])
	if !ok1 || !ok2 || !ok3 || flags&flagUnicode == 0 {
		return "", false
	}
	// An NTLMv1 response is 24 bytes; NTLMv2 is NTProofStr (16) plus a blob of at least 28.
	if len(ntResp) < 16+28 || ntResp[16] != 1 || ntResp[17] != 1 {
		return "", false
	}
	name, domain := fromUTF16le(userRaw), fromUTF16le(domainRaw)
	user, password, ok := s.lookupUser(name)
	if !ok {
		return "", false
	}
	ntHash := md4.New()
	ntHash.Write(utf16le(password))
	v2Hash := hmacMD5(ntHash.Sum(nil), utf16le(strings.ToUpper(name)+domain))
	proof := hmacMD5(v2Hash, challenge, ntResp[16:])
	if !hmac.Equal(proof, ntResp[:16]) {
		return "", false
	}
	// The session keys (MS-NLMP 3.3.2, 3.4.5): NTLMv2's session base key is the key exchange key;
	// with KEY_EXCH the client chose the exported session key and sent it sealed with that key.
	negotiated := flags & offered
	exported := hmacMD5(v2Hash, proof)
	if negotiated&flagKeyExch != 0 {
		encrypted, ok := readVarField(msg, 52)
		if !ok || len(encrypted) != 16 {
			return "", false
		}
		c, _ := rc4.NewCipher(exported)
		exported = make([]byte, 16)
		c.XORKeyStream(exported, encrypted)
	}
	// A client that says so in its response's MsvAvFlags (MS-NLMP 2.2.2.1) put a MIC in the
	// AUTHENTICATE: the HMAC-MD5 under the exported session key of all three messages, the MIC
	// field zeroed (3.1.5.1.2). It binds the flags the client asked for to the authentication, so a
	// man in the middle who stripped SEAL from the NEGOTIATE is caught; a wrong MIC is refused.
	if avFlags(ntResp[16+28:])&avFlagMIC != 0 {
		if len(msg) < micOffset+16 {
			return "", false
		}
		zeroed := bytes.Clone(msg)
		clear(zeroed[micOffset : micOffset+16])
		if !hmac.Equal(hmacMD5(exported, messages, zeroed), msg[micOffset:micOffset+16]) {
			return "", false
		}
	}
	var session *ntlmSession
	if negotiated&flagSeal != 0 {
		session = newNTLMSession(exported, negotiated&flagKeyExch != 0)
	}
	cs.mu.Lock()
	cs.user, cs.session = user, session
	cs.mu.Unlock()
	return user, true
}

// micOffset is where an AUTHENTICATE message carries its MIC: after the fixed fields and the
// 8-byte Version (MS-NLMP 2.2.1.3).
const micOffset = 72

// avFlagMIC is MsvAvFlags' bit saying the AUTHENTICATE carries a MIC.
const avFlagMIC = 0x2

// avFlags returns the MsvAvFlags value in an NTLMv2 response's AV_PAIR list, 0 when absent or
// malformed.
func avFlags(pairs []byte) uint32 {
	for len(pairs) >= 4 {
		id, n := binary.LittleEndian.Uint16(pairs), int(binary.LittleEndian.Uint16(pairs[2:]))
		if id == 0 || len(pairs) < 4+n {
			return 0
		}
		if id == 6 && n == 4 {
			return binary.LittleEndian.Uint32(pairs[4:])
		}
		pairs = pairs[4+n:]
	}
	return 0
}

func hmacMD5(key []byte, data ...[]byte) []byte {
	mac := hmac.New(md5.New, key)
	for _, d := range data {
		mac.Write(d)
	}
	return mac.Sum(nil)
}
