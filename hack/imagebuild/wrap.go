package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// wrapped is a static binary of another project (Cluster API's managers, cert-manager) made into
// an image the way HyperFleet's own are: the same base layer, the binary at Entry, user 65532.
// The installed tests (test/installed) run `clusterctl init` on a node that cannot pull, so every
// image the install names is built here from the Go module proxy and imported.
type wrapped struct {
	// Ref is the image reference the install's manifests name, e.g.
	// registry.k8s.io/cluster-api/cluster-api-controller:v1.12.5.
	Ref string
	// Entry is the binary's path in the image and the entrypoint, e.g. /manager (Cluster API's
	// Deployments name it in their command lines).
	Entry string
	// Binary is the file on this machine.
	Binary string
}

// parseWrap reads REF=ENTRY=BINARY.
func parseWrap(v string) (wrapped, error) {
	parts := strings.SplitN(v, "=", 3)
	if len(parts) != 3 || parts[0] == "" || !strings.HasPrefix(parts[1], "/") || parts[2] == "" {
		return wrapped{}, fmt.Errorf("-wrap %q: want REF=/ENTRY=BINARY", v)
	}
	if _, err := name.NewTag(parts[0], name.StrictValidation); err != nil {
		return wrapped{}, fmt.Errorf("-wrap %q: %w", v, err)
	}
	return wrapped{Ref: parts[0], Entry: parts[1], Binary: parts[2]}, nil
}

// wrapFlag collects repeated -wrap flags.
type wrapFlag []wrapped

func (f *wrapFlag) String() string { return fmt.Sprint(len(*f)) }
func (f *wrapFlag) Set(v string) error {
	w, err := parseWrap(v)
	if err == nil {
		*f = append(*f, w)
	}
	return err
}

// wrapAll writes one docker-archive tarball per wrapped binary, for o's first platform (the
// binaries are this machine's), named after the reference's last path element, and returns the
// archives' paths.
func wrapAll(o options, ws []wrapped) ([]string, error) {
	ca, err := os.ReadFile(o.CABundle)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	base, err := layer(baseEntries(ca), o.Created)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	p := o.Platforms[0]
	var out []string
	for _, w := range ws {
		tag, err := name.NewTag(w.Ref, name.StrictValidation)
		if err != nil {
			return nil, err
		}
		repo := tag.RepositoryStr()
		short := repo[strings.LastIndex(repo, "/")+1:]
		spec := imageSpec{Name: short, Repository: repo, Command: strings.TrimPrefix(w.Entry, "/"), Title: short}
		img, err := image(o, spec, p, base, w.Binary, map[string]string{
			"org.opencontainers.image.title":       short,
			"org.opencontainers.image.version":     tag.TagStr(),
			"org.opencontainers.image.description": "built from " + filepath.Base(w.Binary) + " by HyperFleet's hack/imagebuild for its installed tests",
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.Ref, err)
		}
		archive := filepath.Join(o.Out, short+".tar")
		if err := tarball.WriteToFile(archive, tag, img); err != nil {
			return nil, err
		}
		out = append(out, archive)
	}
	return out, nil
}
