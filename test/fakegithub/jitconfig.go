package fakegithub

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// JITConfig is what the fake's encoded_jit_config carries. Real GitHub encodes the runner's
// credentials; the fake encodes where to find it (URL) and a per-runner token for the /_fake/
// runner protocol, so a fake runner can "run" with nothing but the config string.
type JITConfig struct {
	RunnerID   int64    `json:"runner_id"`
	RunnerName string   `json:"runner_name"`
	Scope      string   `json:"scope"` // "owner/name" or "org"
	URL        string   `json:"url"`   // the fake's base URL
	Token      string   `json:"token"`
	Labels     []string `json:"labels"`
	// CA is the fake's certificate when it serves HTTPS, so a runner given nothing but the
	// config can verify the server it talks to.
	CA string `json:"ca,omitempty"`
}

// EncodeJITConfig renders a config as base64 JSON, the shape of encoded_jit_config.
func EncodeJITConfig(c JITConfig) string {
	b, _ := json.Marshal(c)
	return base64.StdEncoding.EncodeToString(b)
}

// DecodeJITConfig parses an encoded_jit_config issued by the fake.
func DecodeJITConfig(encoded string) (JITConfig, error) {
	var c JITConfig
	raw, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil {
		return c, fmt.Errorf("jit config is not base64: %w", err)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, fmt.Errorf("jit config is not fake JSON: %w", err)
	}
	if c.RunnerID == 0 || c.Token == "" || c.URL == "" {
		return c, errors.New("jit config lacks runner_id, token or url")
	}
	return c, nil
}
