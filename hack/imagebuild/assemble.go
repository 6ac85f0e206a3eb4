package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// builtImage is what one image's build produced: its index and the per-platform images.
type builtImage struct {
	Spec      imageSpec
	Ref       string
	Index     v1.ImageIndex
	Platforms []builtPlatform
}

type builtPlatform struct {
	Platform platform
	Image    v1.Image
	// Archive is the docker-archive tarball of this platform's image.
	Archive string
}

// labels are the OCI annotations every image carries, in its config (what `docker inspect`
// shows) and on its manifests (what registries show).
func labels(o options, s imageSpec) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    s.Title,
		"org.opencontainers.image.source":   o.Source,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.created":  o.Created.UTC().Format(time.RFC3339),
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// image assembles one platform's image from nothing: the shared base layer, the binary's layer and
// a config that runs the binary as 65532:65532.
func image(o options, s imageSpec, p platform, base v1.Layer, binary string, labels map[string]string) (v1.Image, error) {
	bin, err := binaryLayer(binary, s.Command, o.Created)
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.Created.UTC()}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "hack/imagebuild: CA certificates, /etc/passwd, /etc/group, /tmp", Comment: "base"}},
		mutate.Addendum{Layer: bin, History: v1.History{Created: created, CreatedBy: "hack/imagebuild: /" + s.Command, Comment: s.Name}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = p.OS, p.Arch
	cf.Created = created
	ports := map[string]struct{}{}
	for _, port := range s.Ports {
		ports[port] = struct{}{}
	}
	cf.Config = v1.Config{
		User:         fmt.Sprintf("%d:%d", nonrootUID, nonrootUID),
		Entrypoint:   []string{"/" + s.Command},
		Env:          []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		WorkingDir:   "/",
		ExposedPorts: ports,
		Labels:       labels,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// assemble builds every image of o from the binaries in binDir and writes them under o.Out.
func assemble(o options, binDir string) ([]builtImage, error) {
	ca, err := os.ReadFile(o.CABundle)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w (install Debian's ca-certificates or pass -ca-bundle)", err)
	}
	base, err := layer(baseEntries(ca), o.Created)
	if err != nil {
		return nil, err
	}
	var out []builtImage
	for _, s := range o.Images {
		b := builtImage{Spec: s, Ref: o.ref(s)}
		tag, err := name.NewTag(b.Ref, name.StrictValidation)
		if err != nil {
			return nil, err
		}
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for _, p := range o.Platforms {
			img, err := image(o, s, p, base, filepath.Join(binDir, p.OS+"_"+p.Arch, s.Command), labels(o, s))
			if err != nil {
				return nil, fmt.Errorf("%s for %s: %w", s.Name, p, err)
			}
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
				Add:        img,
				Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch}},
			})
			archive := filepath.Join(o.Out, fmt.Sprintf("%s-%s-%s.tar", s.Name, p.OS, p.Arch))
			if err := tarball.WriteToFile(archive, tag, img); err != nil {
				return nil, err
			}
			b.Platforms = append(b.Platforms, builtPlatform{Platform: p, Image: img, Archive: archive})
		}
		b.Index = mutate.Annotations(idx, labels(o, s)).(v1.ImageIndex)
		if err := writeLayout(filepath.Join(o.Out, s.Name), b.Index, o.Version); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// writeLayout replaces dir with an OCI layout holding the one index, tagged version (the
// ref.name that `skopeo copy oci:dir:version` looks for).
func writeLayout(dir string, idx v1.ImageIndex, version string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": version,
	}))
}
