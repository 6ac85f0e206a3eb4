package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestWrapMakesAnImageOfAPrebuiltBinary wraps a file as another project's binary and reads the
// archive back as containerd would import it: tagged with the reference, the binary at its entry
// and run from there as 65532, beside the base layer's CA bundle and passwd.
func TestWrapMakesAnImageOfAPrebuiltBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "capi-manager")
	if err := os.WriteFile(bin, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := testOptions(t, filepath.Join(dir, "out"))
	const ref = "registry.k8s.io/cluster-api/cluster-api-controller:v1.12.5"
	w, err := parseWrap(ref + "=/manager=" + bin)
	if err != nil {
		t.Fatal(err)
	}
	archives, err := wrapAll(o, []wrapped{w})
	if err != nil {
		t.Fatal(err)
	}
	if len(archives) != 1 || filepath.Base(archives[0]) != "cluster-api-controller.tar" {
		t.Fatalf("archives %v, want one cluster-api-controller.tar", archives)
	}
	tag, _ := name.NewTag(ref)
	img, err := tarball.ImageFromPath(archives[0], &tag)
	if err != nil {
		t.Fatalf("the archive holds no image tagged %s: %v", ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Entrypoint; len(got) != 1 || got[0] != "/manager" {
		t.Errorf("entrypoint %v, want [/manager]", got)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cf.Config.User)
	}
	if cf.Architecture != o.Platforms[0].Arch || cf.Config.Labels["org.opencontainers.image.version"] != "v1.12.5" {
		t.Errorf("architecture %q, labels %v", cf.Architecture, cf.Config.Labels)
	}
	files := flatten(t, img)
	if f, ok := files["manager"]; !ok || f.header.Mode != 0o755 {
		t.Errorf("no executable /manager in %v", sortedKeys(files))
	}
	for _, want := range []string{caPath, "etc/passwd"} {
		if _, ok := files[want]; !ok {
			t.Errorf("no /%s in %v", want, sortedKeys(files))
		}
	}
}

func TestWrapRefusesMalformedArguments(t *testing.T) {
	for _, bad := range []string{
		"registry.k8s.io/cluster-api/cluster-api-controller:v1.12.5=/manager",   // no binary
		"registry.k8s.io/cluster-api/cluster-api-controller:v1.12.5=manager=/b", // entry not absolute
		"=/manager=/b",             // no reference
		"Not A Ref:v1=/manager=/b", // not a reference
	} {
		if _, err := parseWrap(bad); err == nil {
			t.Errorf("parseWrap(%q) accepted it", bad)
		}
	}
}
