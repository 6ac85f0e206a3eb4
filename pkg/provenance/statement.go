package provenance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

const (
	// StatementType is the _type of an in-toto Statement v1.
	StatementType = "https://in-toto.io/Statement/v1"
	// PredicateType names HyperFleet's job record as an in-toto predicate.
	PredicateType = "https://hyperfleet.io/provenance/job-record/v1"
	// PayloadType is the DSSE payloadType of an in-toto Statement.
	PayloadType = "application/vnd.in-toto+json"
)

// Statement is an in-toto Statement v1 whose subject is one job and whose predicate is that job's
// record.
type Statement struct {
	Type          string          `json:"_type"`
	Subject       []Subject       `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

// Subject names what a Statement is about and pins it by digest.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// NewStatement makes the Statement for one job's record: the subject is named
// "<platform>/<job id>" and its sha256 digest is PredicateDigest of the record, so the signature
// binds the job's name to exactly this record.
func NewStatement(platform, jobID string, record any) (Statement, error) {
	if platform == "" || jobID == "" {
		return Statement{}, errors.New("provenance: a job's statement needs its platform and job id")
	}
	raw, err := marshalUnescaped(record)
	if err != nil {
		return Statement{}, fmt.Errorf("provenance: encoding the record: %w", err)
	}
	predicate, err := CanonicalPredicate(raw)
	if err != nil {
		return Statement{}, err
	}
	return Statement{
		Type:          StatementType,
		Subject:       []Subject{{Name: platform + "/" + jobID, Digest: map[string]string{"sha256": digest(predicate)}}},
		PredicateType: PredicateType,
		Predicate:     predicate,
	}, nil
}

// CanonicalPredicate is the form of a predicate the subject digest is taken over: its JSON with
// insignificant whitespace removed and nothing else changed (no key reordering, no re-escaping).
// Sign writes the predicate into the payload in exactly this form, so anyone can check the digest
// by hashing the predicate's bytes as they stand in the signed payload.
func CanonicalPredicate(raw json.RawMessage) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("%w: the predicate is not JSON: %v", ErrMalformed, err)
	}
	if buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return nil, fmt.Errorf("%w: the predicate is not a JSON object", ErrMalformed)
	}
	return buf.Bytes(), nil
}

// PredicateDigest is the hex sha256 of a predicate's canonical form.
func PredicateDigest(raw json.RawMessage) (string, error) {
	canonical, err := CanonicalPredicate(raw)
	if err != nil {
		return "", err
	}
	return digest(canonical), nil
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// check is what Verify requires of a signed statement and Sign of one it is asked to sign: the
// in-toto and HyperFleet types, one named subject, and that subject's sha256 equal to the
// predicate's digest.
func (s Statement) check() error {
	if s.Type != StatementType {
		return fmt.Errorf("%w: _type is %q, want %q", ErrUnsupportedStatement, s.Type, StatementType)
	}
	if s.PredicateType != PredicateType {
		return fmt.Errorf("%w: predicateType is %q, want %q", ErrUnsupportedStatement, s.PredicateType, PredicateType)
	}
	if len(s.Subject) != 1 {
		return fmt.Errorf("%w: a job record has exactly one subject, this statement has %d", ErrUnsupportedStatement, len(s.Subject))
	}
	subject := s.Subject[0]
	if subject.Name == "" {
		return fmt.Errorf("%w: the subject has no name", ErrUnsupportedStatement)
	}
	want, err := PredicateDigest(s.Predicate)
	if err != nil {
		return err
	}
	got, ok := subject.Digest["sha256"]
	if !ok {
		return fmt.Errorf("%w: subject %q carries no sha256 digest", ErrDigestMismatch, subject.Name)
	}
	if got != want {
		return fmt.Errorf("%w: subject %q names sha256 %s, the predicate's is %s", ErrDigestMismatch, subject.Name, got, want)
	}
	return nil
}

// marshal encodes a statement for signing without HTML escaping, so the predicate keeps its
// canonical bytes inside the payload.
func (s Statement) marshal() ([]byte, error) { return marshalUnescaped(s) }

// marshalUnescaped is json.Marshal without rewriting <, > and & as \u escapes, which would make
// the record harder to read and gain nothing: it is never embedded in HTML.
func marshalUnescaped(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
