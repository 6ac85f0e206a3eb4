package hvsim

import (
	"encoding/binary"
	"testing"

	"github.com/Azure/go-ntlmssp"
)

// FuzzNTLMAuthenticate feeds arbitrary AUTHENTICATE messages to the server: none may panic, and
// none may authenticate, since only the password's hash can produce the proof.
func FuzzNTLMAuthenticate(f *testing.F) {
	s := &Server{opts: Options{Users: map[string]string{testUser: testPassword}}}
	cs := &connState{}
	// A NEGOTIATE asking for sealing, so a forged message that authenticated would derive session
	// keys too. Not KEY_EXCH: go-ntlmssp, which makes the valid seed, refuses a challenge offering it
	// (pywinrm's test covers the key exchange).
	negotiate := binary.LittleEndian.AppendUint32(append([]byte("NTLMSSP\x00"), 1, 0, 0, 0), flagSign|flagSeal)
	challenge, err := s.ntlmChallenge(cs, negotiate)
	if err != nil {
		f.Fatal(err)
	}
	valid, err := ntlmssp.ProcessChallenge(challenge, testUser, "wrong password")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(valid[:64])
	f.Add([]byte("NTLMSSP\x00\x03\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		cs := &connState{}
		if _, err := s.ntlmChallenge(cs, negotiate); err != nil {
			t.Fatal(err)
		}
		if user, ok := s.ntlmAuthenticate(cs, msg); ok {
			t.Fatalf("authenticated %q with a forged message", user)
		}
	})
}

// FuzzParseEnvelope: any request body is parsed or refused, never a panic.
func FuzzParseEnvelope(f *testing.F) {
	f.Add([]byte(`<s:Envelope xmlns:s="http://www.w3.org/2003/05/soap-envelope"><s:Header/><s:Body/></s:Envelope>`))
	f.Add([]byte("<x"))
	f.Fuzz(func(t *testing.T, body []byte) {
		if env, fault := parseEnvelope(body); fault == nil {
			_ = env.selector("ShellId")
			_, _ = parseDuration(env.Header.OperationTimeout)
		}
	})
}

// FuzzDecodePowerShell: any command line decodes or is refused, never a panic.
func FuzzDecodePowerShell(f *testing.F) {
	f.Add("powershell.exe -EncodedCommand JABQAA==")
	f.Add("pwsh -e !")
	f.Fuzz(func(t *testing.T, line string) {
		_, _, _ = DecodePowerShell(line)
	})
}
