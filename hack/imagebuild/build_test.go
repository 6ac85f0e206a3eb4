package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The images are built once (first build) for every test that inspects them, in a directory of the
// test's own, from this checkout, as `make images` builds them.
var (
	firstBuild     sync.Once
	firstOpts      options
	firstErr       error
	firstBuildTime time.Duration
)

func testOptions(t *testing.T, out string) options {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rev, err := git(root, "rev-parse", "HEAD")
	if err != nil {
		rev = "0000000000000000000000000000000000000000" // a source tarball: no commit to name
	}
	created := time.Unix(1767225600, 0).UTC()
	if ct, err := git(root, "log", "-1", "--format=%ct"); err == nil {
		if secs, err := strconv.ParseInt(ct, 10, 64); err == nil {
			created = time.Unix(secs, 0).UTC()
		}
	}
	return options{
		Root: root, Out: out, Registry: "ghcr.io/hyperfleet-io", Version: makefileReleaseTag(t),
		Revision: rev, Created: created, Source: "https://github.com/hyperfleet-io/hyperfleet",
		Platforms: defaultPlatforms, Images: specs, CABundle: "/etc/ssl/certs/ca-certificates.crt",
	}
}

// built returns the options of the first build, building it on first use.
func built(t *testing.T) options {
	t.Helper()
	if testing.Short() {
		t.Skip("builds three commands for two platforms")
	}
	firstBuild.Do(func() {
		dir, err := os.MkdirTemp("", "imagebuild-test-")
		if err != nil {
			firstErr = err
			return
		}
		firstOpts = testOptions(t, dir)
		start := time.Now()
		_, firstErr = build(firstOpts, io.Discard)
		firstBuildTime = time.Since(start)
	})
	if firstErr != nil {
		t.Fatalf("first build: %v", firstErr)
	}
	return firstOpts
}

func TestMain(m *testing.M) {
	code := m.Run()
	if firstOpts.Out != "" {
		_ = os.RemoveAll(firstOpts.Out)
	}
	os.Exit(code)
}

// TestBuildsAreReproducible builds everything a second time, binaries included, and expects every
// byte of the output again: the same index and image digests, the same tarballs.
func TestBuildsAreReproducible(t *testing.T) {
	g := NewWithT(t)
	first := built(t)
	// The same inputs as the first build (HEAD may move meanwhile in a shared checkout).
	second := first
	second.Out = t.TempDir()
	start := time.Now()
	_, err := build(second, io.Discard)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("first build %s, second build %s", firstBuildTime.Round(time.Second), time.Since(start).Round(time.Second))

	a, b := treeDigests(t, first.Out), treeDigests(t, second.Out)
	g.Expect(a).NotTo(BeEmpty())
	g.Expect(b).To(Equal(a))
	for _, s := range specs {
		d := indexDigest(t, filepath.Join(first.Out, s.Name))
		t.Logf("%s@%s", first.ref(s), d)
	}
}

func TestIndexHasEveryPlatform(t *testing.T) {
	o := built(t)
	for _, s := range specs {
		t.Run(s.Name, func(t *testing.T) {
			g := NewWithT(t)
			idx := readIndex(t, filepath.Join(o.Out, s.Name))
			im, err := idx.IndexManifest()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(im.MediaType).To(Equal(types.OCIImageIndex))
			var got []string
			for _, m := range im.Manifests {
				g.Expect(m.MediaType).To(Equal(types.OCIManifestSchema1))
				g.Expect(m.Platform).NotTo(BeNil())
				got = append(got, m.Platform.OS+"/"+m.Platform.Architecture)
				img, err := idx.Image(m.Digest)
				g.Expect(err).NotTo(HaveOccurred())
				cf, err := img.ConfigFile()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cf.OS + "/" + cf.Architecture).To(Equal(m.Platform.OS + "/" + m.Platform.Architecture))
			}
			g.Expect(got).To(ConsistOf("linux/amd64", "linux/arm64"))
		})
	}
}

// TestImagesHoldOnlyWhatTheyNeed checks each image's config and its whole file system: the binary,
// CA certificates, passwd and group, /tmp, the user's home, and nothing else (no shell).
func TestImagesHoldOnlyWhatTheyNeed(t *testing.T) {
	o := built(t)
	for _, s := range specs {
		for _, img := range platformImages(t, filepath.Join(o.Out, s.Name)) {
			t.Run(s.Name+"/"+img.platform, func(t *testing.T) {
				g := NewWithT(t)
				cf, err := img.image.ConfigFile()
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(cf.Config.User).To(Equal("65532:65532"))
				g.Expect(cf.Config.Entrypoint).To(Equal([]string{"/" + s.Command}))
				g.Expect(cf.Config.Cmd).To(BeEmpty())
				g.Expect(cf.Created.Time.Equal(o.Created)).To(BeTrue())
				g.Expect(cf.Config.Labels).To(HaveKeyWithValue("org.opencontainers.image.source", o.Source))
				g.Expect(cf.Config.Labels).To(HaveKeyWithValue("org.opencontainers.image.revision", o.Revision))
				g.Expect(cf.Config.Labels).To(HaveKeyWithValue("org.opencontainers.image.version", o.Version))
				g.Expect(cf.Config.Labels).To(HaveKeyWithValue("org.opencontainers.image.created", o.Created.Format(time.RFC3339)))

				files := flatten(t, img.image)
				g.Expect(files).NotTo(HaveKey("bin/sh"))
				g.Expect(sortedKeys(files)).To(ConsistOf(
					s.Command, "etc", "etc/group", "etc/passwd", "etc/ssl", "etc/ssl/certs", caPath,
					"home", "home/nonroot", "tmp",
				))
				g.Expect(string(files["etc/passwd"].data)).To(ContainSubstring("nonroot:x:65532:65532:"))
				g.Expect(string(files["etc/group"].data)).To(ContainSubstring("nonroot:x:65532:"))
				g.Expect(files[caPath].data).To(ContainSubstring("-----BEGIN CERTIFICATE-----"))
				for name, f := range files {
					g.Expect(f.header.ModTime.Equal(o.Created)).To(BeTrue(), name)
					if name != "home/nonroot" {
						g.Expect([]int{f.header.Uid, f.header.Gid}).To(Equal([]int{0, 0}), name)
					}
				}
				g.Expect(files[s.Command].header.Mode).To(Equal(int64(0o755)))

				// A static executable for the image's architecture: no interpreter (dynamic
				// loader) to find in an image that has none.
				bin, err := elf.NewFile(bytes.NewReader(files[s.Command].data))
				g.Expect(err).NotTo(HaveOccurred())
				want := map[string]elf.Machine{"linux/amd64": elf.EM_X86_64, "linux/arm64": elf.EM_AARCH64}[img.platform]
				g.Expect(bin.Machine).To(Equal(want))
				g.Expect(bin.Type).To(Equal(elf.ET_EXEC))
				for _, p := range bin.Progs {
					g.Expect(p.Type).NotTo(Equal(elf.PT_INTERP))
					g.Expect(p.Type).NotTo(Equal(elf.PT_DYNAMIC))
				}
				g.Expect(files[s.Command].data).To(ContainSubstring(o.Revision), "the revision is linked in")
			})
		}
	}
}

// TestArchivesHoldTheLayoutsImages checks that each docker-archive tarball (what `ctr images
// import` loads) names the image's reference and holds the same config and layers as the layout.
func TestArchivesHoldTheLayoutsImages(t *testing.T) {
	o := built(t)
	for _, s := range specs {
		for _, img := range platformImages(t, filepath.Join(o.Out, s.Name)) {
			t.Run(s.Name+"/"+img.platform, func(t *testing.T) {
				g := NewWithT(t)
				archive := filepath.Join(o.Out, fmt.Sprintf("%s-linux-%s.tar", s.Name, filepath.Base(img.platform)))
				m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(archive) })
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(m).To(HaveLen(1))
				g.Expect(m[0].RepoTags).To(Equal([]string{o.ref(s)}))
				fromArchive, err := tarball.ImageFromPath(archive, nil)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(configName(t, fromArchive)).To(Equal(configName(t, img.image)))
			})
		}
	}
}

// TestLayersAreDeterministic needs no build: a layer's bytes follow from its entries and time
// alone, whatever order the entries come in.
func TestLayersAreDeterministic(t *testing.T) {
	g := NewWithT(t)
	when := time.Unix(1767225600, 0)
	entries := baseEntries([]byte("-----BEGIN CERTIFICATE-----\n"))
	a, err := layer(entries, when)
	g.Expect(err).NotTo(HaveOccurred())
	reversed := append([]entry(nil), entries...)
	sort.Slice(reversed, func(i, j int) bool { return reversed[i].Name > reversed[j].Name })
	b, err := layer(reversed, when)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := layer(entries, when.Add(time.Second))
	g.Expect(err).NotTo(HaveOccurred())
	da, _ := a.Digest()
	db, _ := b.Digest()
	dc, _ := c.Digest()
	g.Expect(db).To(Equal(da))
	g.Expect(dc).NotTo(Equal(da))
}

type platformImage struct {
	platform string
	image    v1.Image
}

func readIndex(t *testing.T, dir string) v1.ImageIndex {
	t.Helper()
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	outer, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := outer.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("%s: %d entries in index.json, want one index", dir, len(m.Manifests))
	}
	idx, err := outer.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

func indexDigest(t *testing.T, dir string) v1.Hash {
	t.Helper()
	d, err := readIndex(t, dir).Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func platformImages(t *testing.T, dir string) []platformImage {
	t.Helper()
	idx := readIndex(t, dir)
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var out []platformImage
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, platformImage{platform: d.Platform.OS + "/" + d.Platform.Architecture, image: img})
	}
	return out
}

func configName(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	h, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

type file struct {
	header *tar.Header
	data   []byte
}

// flatten reads the image's file system as a container runtime unpacks it.
func flatten(t *testing.T, img v1.Image) map[string]file {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]file{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = file{header: h, data: b}
	}
}

func sortedKeys(m map[string]file) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// treeDigests maps every file under dir to its SHA-256.
func treeDigests(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[rel] = fmt.Sprintf("%x", sha256.Sum256(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// makefileReleaseTag is the version `make images` tags with by default.
func makefileReleaseTag(t *testing.T) string {
	t.Helper()
	return makefileVar(t, "RELEASE_TAG")
}
