package hvsim

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"strings"
	"sync"
)

// connState is what one TCP connection has proven: NTLM authenticates a connection, as HTTP.sys
// does for WinRM, so later requests on it need no Authorization header.
type connState struct {
	mu        sync.Mutex
	challenge []byte       // the NTLM server challenge awaiting an AUTHENTICATE message
	offered   uint32       // the flags the challenge offered
	messages  []byte       // the NEGOTIATE and CHALLENGE messages, which an AUTHENTICATE's MIC covers
	user      string       // the user NTLM authenticated on this connection
	session   *ntlmSession // its sealing state, when SEAL was negotiated
}

type connKey struct{}

func withConnState(ctx context.Context, _ net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, &connState{})
}

// lookupUser finds name's configured password; Windows account names are case-insensitive, and
// a DOMAIN\ or @domain qualification is ignored.
func (s *Server) lookupUser(name string) (canonical, password string, ok bool) {
	if _, after, found := strings.Cut(name, `\`); found {
		name = after
	}
	if before, _, found := strings.Cut(name, "@"); found {
		name = before
	}
	for u, pw := range s.opts.Users {
		if strings.EqualFold(u, name) {
			return u, pw, true
		}
	}
	return "", "", false
}

// authenticate returns the user a request speaks for, or answers it (401 with the
// WWW-Authenticate offers or the NTLM challenge) and returns "".
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) string {
	cs, _ := r.Context().Value(connKey{}).(*connState)
	if cs == nil {
		cs = &connState{}
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	switch {
	case strings.EqualFold(scheme, "Basic") && !s.opts.DisableBasic:
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(token))
		if err == nil {
			name, pw, _ := strings.Cut(string(raw), ":")
			if user, want, ok := s.lookupUser(name); ok && subtle.ConstantTimeCompare([]byte(pw), []byte(want)) == 1 {
				return user
			}
		}
	case (strings.EqualFold(scheme, "Negotiate") || strings.EqualFold(scheme, "NTLM")) && !s.opts.DisableNTLM:
		msg, err := base64.StdEncoding.DecodeString(strings.TrimSpace(token))
		if err != nil {
			break
		}
		switch ntlmMessageType(msg) {
		case 1:
			challenge, err := s.ntlmChallenge(cs, msg)
			if err != nil {
				break
			}
			w.Header().Set("WWW-Authenticate", scheme+" "+base64.StdEncoding.EncodeToString(challenge))
			s.writeUnauthorized(w, false)
			return ""
		case 3:
			if user, ok := s.ntlmAuthenticate(cs, msg); ok {
				return user
			}
		}
	case scheme == "":
		cs.mu.Lock()
		user := cs.user
		cs.mu.Unlock()
		if user != "" {
			return user
		}
	}
	if !s.opts.DisableNTLM {
		w.Header().Add("WWW-Authenticate", "Negotiate")
	}
	if !s.opts.DisableBasic {
		w.Header().Add("WWW-Authenticate", `Basic realm="WSMAN"`)
	}
	s.writeUnauthorized(w, scheme != "")
	return ""
}

// writeUnauthorized answers 401 with no body, as WinRM does; refused marks credentials that were
// presented and refused (counted), not a request without any or the NTLM challenge round.
func (s *Server) writeUnauthorized(w http.ResponseWriter, refused bool) {
	if refused {
		s.mu.Lock()
		s.stats.Unauthorized++
		s.mu.Unlock()
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusUnauthorized)
}
