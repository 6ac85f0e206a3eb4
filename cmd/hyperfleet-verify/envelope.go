package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
)

// findEnvelope takes the DSSE envelope out of what it is given: the envelope itself, or a job
// record export whose "envelope" field holds one as an object, as JSON text, or as base64 of
// either.
func findEnvelope(data []byte) (provenance.Envelope, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return provenance.Envelope{}, fmt.Errorf("the input is not a JSON object: %w", err)
	}
	if _, ok := fields["payloadType"]; ok {
		return provenance.ParseEnvelope(data)
	}
	raw, ok := fields["envelope"]
	if !ok {
		return provenance.Envelope{}, errors.New("the input is neither a DSSE envelope nor a job record with an \"envelope\" field")
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' {
		return provenance.ParseEnvelope(raw)
	}
	var text string
	if err := json.Unmarshal(raw, &text); err != nil {
		return provenance.Envelope{}, fmt.Errorf("the \"envelope\" field: %w", err)
	}
	inner := bytes.TrimSpace([]byte(text))
	if len(inner) > 0 && inner[0] == '{' {
		return provenance.ParseEnvelope(inner)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if decoded, err := enc.DecodeString(text); err == nil {
			return provenance.ParseEnvelope(decoded)
		}
	}
	return provenance.Envelope{}, errors.New("the \"envelope\" field is a string but neither a DSSE envelope nor base64 of one")
}
