// Package schema embeds the subset of the Proxmox VE 9.1 API schema that the
// HyperFleet PVE simulator serves. The JSON file is generated from the
// pve-docs apidata.js schema by hack/gen-pve-schema.go and committed, so a
// fresh clone needs nothing else.
package schema

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

//go:embed pve-api-subset.json
var raw []byte

// Document is the embedded schema subset.
type Document struct {
	Source    string      `json:"source"`
	Endpoints []*Endpoint `json:"endpoints"`
}

// Endpoint is one API method: its path template, parameters and permission check.
type Endpoint struct {
	Method      string       `json:"method"`
	Path        string       `json:"path"`
	Parameters  *Property    `json:"parameters"`
	Permissions *Permissions `json:"permissions"`
	AllowToken  int          `json:"allowtoken"`
	Protected   int          `json:"protected"`
	Returns     struct {
		Type string `json:"type"`
	} `json:"returns"`
}

// Permissions is PVE's permission description: either a user class
// ("all", "world") or a check expression such as
// ["perm", "/vms/{vmid}", ["VM.Allocate"]].
type Permissions struct {
	User  string `json:"user"`
	Check []any  `json:"check"`
}

// Property is a JSON-schema-like property as PVE's PVE::JSONSchema understands it.
type Property struct {
	Type                 string               `json:"type"`
	Enum                 []string             `json:"enum"`
	Pattern              string               `json:"pattern"`
	Optional             int                  `json:"optional"`
	Minimum              *Number              `json:"minimum"`
	Maximum              *Number              `json:"maximum"`
	MaxLength            *int                 `json:"maxLength"`
	MinLength            *int                 `json:"minLength"`
	AdditionalProperties *int                 `json:"additionalProperties"`
	Properties           map[string]*Property `json:"properties"`
	Items                *Property            `json:"items"`
	Requires             string               `json:"requires"`
	DefaultKey           int                  `json:"default_key"`
	Alias                string               `json:"alias"`
	KeyAlias             string               `json:"keyAlias"`
	// Format is either a named format ("pve-vmid") or an inline
	// property-string format (FormatProps).
	Format      string               `json:"-"`
	FormatProps map[string]*Property `json:"-"`
}

// UnmarshalJSON splits the polymorphic "format" field.
func (p *Property) UnmarshalJSON(b []byte) error {
	type plain Property
	var aux struct {
		*plain
		Format json.RawMessage `json:"format"`
	}
	aux.plain = (*plain)(p)
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	if len(aux.Format) == 0 {
		return nil
	}
	if aux.Format[0] == '"' {
		return json.Unmarshal(aux.Format, &p.Format)
	}
	return json.Unmarshal(aux.Format, &p.FormatProps)
}

// Number accepts both JSON numbers and numeric strings, as PVE's schema dump uses both.
type Number float64

// UnmarshalJSON implements json.Unmarshaler.
func (n *Number) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("schema number %q: %w", s, err)
	}
	*n = Number(f)
	return nil
}

// String renders the number as Perl would interpolate it.
func (n Number) String() string {
	return strconv.FormatFloat(float64(n), 'f', -1, 64)
}

// Load parses the embedded schema subset.
func Load() (*Document, error) {
	var doc Document
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("parse embedded PVE schema: %w", err)
	}
	return &doc, nil
}
