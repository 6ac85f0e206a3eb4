package console

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"
)

// sealer encrypts and authenticates cookie values (AES-256-GCM), so the console keeps sessions
// and sign-in state in the browser and none in memory: any replica, or a restarted console, reads
// them.
type sealer struct {
	aead cipher.AEAD
}

var errBadSeal = errors.New("cookie is not sealed by this console or has expired")

func newSealer(key []byte) (*sealer, error) {
	k := sha256.Sum256(key)
	block, err := aes.NewCipher(k[:])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &sealer{aead: aead}, nil
}

// envelope carries the purpose, so a sign-in cookie is never accepted as a session and back.
type envelope struct {
	Purpose string          `json:"p"`
	Expires int64           `json:"e"`
	Value   json.RawMessage `json:"v"`
}

func (s *sealer) seal(purpose string, expires time.Time, v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	plain, err := json.Marshal(envelope{Purpose: purpose, Expires: expires.Unix(), Value: raw})
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, []byte(purpose))), nil
}

func (s *sealer) open(purpose, sealed string, v any) error {
	data, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil || len(data) < s.aead.NonceSize() {
		return errBadSeal
	}
	plain, err := s.aead.Open(nil, data[:s.aead.NonceSize()], data[s.aead.NonceSize():], []byte(purpose))
	if err != nil {
		return errBadSeal
	}
	var e envelope
	if err := json.Unmarshal(plain, &e); err != nil || e.Purpose != purpose || time.Now().Unix() >= e.Expires {
		return errBadSeal
	}
	return json.Unmarshal(e.Value, v)
}
