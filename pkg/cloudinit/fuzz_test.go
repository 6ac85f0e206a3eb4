package cloudinit

import (
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzMerge: merging a template's user-data with bootstrap data never panics, and never loses the
// bootstrap data: two #cloud-config documents merge into one in which every bootstrap key is
// present, its scalars win, its lists follow the template's; anything else becomes a multi-part
// archive carrying both parts whole.
func FuzzMerge(f *testing.F) {
	f.Add("#cloud-config\npackages: [git]\nruncmd:\n- echo template\n",
		"#cloud-config\nruncmd:\n- /opt/hyperfleet/agent\nwrite_files:\n- path: /etc/hyperfleet/agent.yaml\n  content: token\n")
	f.Add("#!/bin/sh\necho template\n", "#cloud-config\nhostname: runner\n")
	f.Add("#cloud-config\nhostname: template\nusers: {a: 1}\n", "#cloud-config\nhostname: bootstrap\nusers: [x]\n")
	f.Add("#cloud-config\n: [\n", "#cloud-config\nx: 1\n")
	f.Add("", "#cloud-config\nx: 1\n")
	f.Add("#cloud-config\nx: 1\n", "   ")
	f.Fuzz(func(t *testing.T, base, overlay string) {
		if len(base)+len(overlay) > 64<<10 {
			return // the API caps user-data at 64 KiB
		}
		out, err := Merge(base, overlay)
		if err != nil {
			return
		}
		switch {
		case strings.TrimSpace(base) == "":
			if out != overlay {
				t.Fatalf("empty template changed the bootstrap data: %q", out)
			}
			return
		case strings.TrimSpace(overlay) == "":
			if out != base {
				t.Fatalf("empty bootstrap data changed the template: %q", out)
			}
			return
		case !IsCloudConfig(base) || !IsCloudConfig(overlay):
			if !strings.Contains(out, base) || !strings.Contains(out, overlay) {
				t.Fatalf("multi-part archive lost a part:\n%s", out)
			}
			return
		}
		if !IsCloudConfig(out) {
			t.Fatalf("merge of two cloud-configs is not a cloud-config: %q", out)
		}
		var b, o, m map[string]any
		if yaml.Unmarshal([]byte(base), &b) != nil || yaml.Unmarshal([]byte(overlay), &o) != nil {
			t.Fatalf("Merge accepted YAML that does not parse")
		}
		if err := yaml.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("merged user-data does not parse: %v\n%s", err, out)
		}
		for k, ov := range o {
			got, ok := m[k]
			if !ok {
				t.Fatalf("bootstrap key %q lost:\n%s", k, out)
			}
			bv := b[k]
			switch ov := ov.(type) {
			case map[string]any:
				if bm, isMap := bv.(map[string]any); isMap {
					gm, _ := got.(map[string]any)
					for kk := range ov {
						if _, ok := gm[kk]; !ok {
							t.Fatalf("bootstrap key %s.%s lost:\n%s", k, kk, out)
						}
					}
					_ = bm
					continue
				}
			case []any:
				if bl, isList := bv.([]any); isList {
					gl, _ := got.([]any)
					if len(gl) != len(bl)+len(ov) || !reflect.DeepEqual(gl[len(bl):], ov) {
						t.Fatalf("list %q is not the template's followed by the bootstrap's:\n%s", k, out)
					}
					continue
				}
			}
			if !reflect.DeepEqual(got, ov) {
				t.Fatalf("bootstrap value of %q lost: got %#v, want %#v", k, got, ov)
			}
		}
		for k := range b {
			if _, ok := m[k]; !ok {
				t.Fatalf("template key %q lost:\n%s", k, out)
			}
		}
	})
}
