package agent

import (
	"encoding/base64"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// ConfigFromUserData extracts the agent configuration that cloud-init would write to path from a
// #cloud-config document, so the agent can run straight from user-data (as the Proxmox
// simulator's boot hook does) without cloud-init.
func ConfigFromUserData(userData []byte, path string) (*Config, error) {
	content, err := FileFromUserData(userData, path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(content)
}

// FileFromUserData returns the content cloud-init would write to path (write_files), decoded.
func FileFromUserData(userData []byte, path string) ([]byte, error) {
	var doc struct {
		WriteFiles []struct {
			Path     string `json:"path"`
			Content  string `json:"content"`
			Encoding string `json:"encoding"`
		} `json:"write_files"`
	}
	if err := yaml.Unmarshal(userData, &doc); err != nil {
		return nil, fmt.Errorf("user-data is not a #cloud-config document: %w", err)
	}
	for _, f := range doc.WriteFiles {
		if f.Path != path {
			continue
		}
		switch strings.ToLower(f.Encoding) {
		case "", "text/plain":
			return []byte(f.Content), nil
		case "b64", "base64":
			content, err := base64.StdEncoding.DecodeString(f.Content)
			if err != nil {
				return nil, fmt.Errorf("user-data %s: %w", path, err)
			}
			return content, nil
		default:
			return nil, fmt.Errorf("user-data %s: unsupported encoding %q", path, f.Encoding)
		}
	}
	return nil, fmt.Errorf("user-data writes no %s", path)
}
