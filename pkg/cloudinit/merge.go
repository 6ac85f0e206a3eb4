package cloudinit

import (
	"bytes"
	"fmt"
	"mime/multipart"
	"net/textproto"
	"strings"

	"sigs.k8s.io/yaml"
)

const cloudConfigHeader = "#cloud-config"

// IsCloudConfig reports whether data is a #cloud-config document.
func IsCloudConfig(data string) bool {
	return strings.HasPrefix(strings.TrimLeft(data, " \t\r\n"), cloudConfigHeader)
}

// Merge combines base (e.g. a MachineClaimTemplate's user-data) with overlay (the bootstrap data).
// Two #cloud-config documents become one: maps merge recursively, lists such as runcmd and
// write_files are concatenated base first, and on conflicting scalars the overlay wins. When either
// part is not #cloud-config (a shell script, say), the result is a MIME multi-part archive that
// cloud-init runs part by part. An empty part yields the other unchanged.
func Merge(base, overlay string) (string, error) {
	switch {
	case strings.TrimSpace(base) == "":
		return overlay, nil
	case strings.TrimSpace(overlay) == "":
		return base, nil
	case IsCloudConfig(base) && IsCloudConfig(overlay):
		return mergeCloudConfigs(base, overlay)
	default:
		return multipartArchive(base, overlay)
	}
}

func mergeCloudConfigs(base, overlay string) (string, error) {
	var b, o map[string]any
	if err := yaml.Unmarshal([]byte(base), &b); err != nil {
		return "", fmt.Errorf("template user-data is not valid YAML: %w", err)
	}
	if err := yaml.Unmarshal([]byte(overlay), &o); err != nil {
		return "", fmt.Errorf("bootstrap user-data is not valid YAML: %w", err)
	}
	out, err := yaml.Marshal(mergeMaps(b, o))
	if err != nil {
		return "", err
	}
	return cloudConfigHeader + "\n" + string(out), nil
}

func mergeMaps(base, overlay map[string]any) map[string]any {
	out := make(map[string]any, len(base)+len(overlay))
	for k, v := range base {
		out[k] = v
	}
	for k, ov := range overlay {
		bv, ok := out[k]
		if !ok {
			out[k] = ov
			continue
		}
		switch o := ov.(type) {
		case map[string]any:
			if b, ok := bv.(map[string]any); ok {
				out[k] = mergeMaps(b, o)
				continue
			}
		case []any:
			if b, ok := bv.([]any); ok {
				out[k] = append(append([]any{}, b...), o...)
				continue
			}
		}
		out[k] = ov
	}
	return out
}

func multipartArchive(parts ...string) (string, error) {
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	for i, p := range parts {
		if strings.TrimSpace(p) == "" {
			continue
		}
		h := textproto.MIMEHeader{}
		h.Set("Content-Type", mimeType(p)+`; charset="utf-8"`)
		h.Set("MIME-Version", "1.0")
		h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="part-%d"`, i))
		pw, err := w.CreatePart(h)
		if err != nil {
			return "", err
		}
		if _, err := pw.Write([]byte(p)); err != nil {
			return "", err
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return fmt.Sprintf("Content-Type: multipart/mixed; boundary=%q\nMIME-Version: 1.0\n\n%s", w.Boundary(), body.String()), nil
}

// mimeType maps user-data formats to the content types cloud-init's multi-part handler knows.
func mimeType(part string) string {
	trimmed := strings.TrimLeft(part, " \t\r\n")
	switch {
	case strings.HasPrefix(trimmed, cloudConfigHeader):
		return "text/cloud-config"
	case strings.HasPrefix(trimmed, "#!"):
		return "text/x-shellscript"
	case strings.HasPrefix(trimmed, "#cloud-boothook"):
		return "text/cloud-boothook"
	}
	return "text/plain"
}

// MetaData is NoCloud meta-data naming the VM: cloud-init sets the hostname from it and keys its
// once-per-instance modules on instance-id.
func MetaData(instanceID, hostname string) string {
	return fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n", instanceID, hostname)
}
