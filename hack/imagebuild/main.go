package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("imagebuild", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := fs.String("root", ".", "repository checkout to build from")
	out := fs.String("out", "bin/images", "directory receiving the OCI layouts and tarballs")
	registry := fs.String("registry", "ghcr.io/hyperfleet-io", "registry and path the image names are under")
	version := fs.String("version", "v0.1.0", "image tag and org.opencontainers.image.version")
	revision := fs.String("revision", "", "commit of org.opencontainers.image.revision (default: git rev-parse HEAD)")
	epoch := fs.String("source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "seconds since 1970 stamped on every file and the config (default: the commit's time)")
	source := fs.String("source", "https://github.com/hyperfleet-io/hyperfleet", "org.opencontainers.image.source")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "platforms of each image's index")
	images := fs.String("images", "", "comma-separated subset of manager, bootstrap-service, console (default: all)")
	caBundle := fs.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "PEM CA bundle copied into the images")
	binDir := fs.String("bin-dir", "", "use binaries already built at <dir>/<os>_<arch>/<command> instead of building them")
	var wraps wrapFlag
	fs.Var(&wraps, "wrap", "REF=/ENTRY=BINARY: instead of HyperFleet's images, make a prebuilt binary of another project into an image for the first platform (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o := options{Registry: *registry, Version: *version, Revision: *revision, Source: *source, CABundle: *caBundle, BinDir: *binDir}
	var err error
	if o.Root, err = filepath.Abs(*root); err != nil {
		return err
	}
	if o.Out, err = filepath.Abs(*out); err != nil {
		return err
	}
	if o.Platforms, err = parsePlatforms(*platforms); err != nil {
		return err
	}
	if o.Images, err = selectSpecs(*images); err != nil {
		return err
	}
	if o.Revision == "" {
		if o.Revision, err = git(o.Root, "rev-parse", "HEAD"); err != nil {
			return fmt.Errorf("no -revision and no git commit: %w", err)
		}
	}
	if *epoch == "" {
		if *epoch, err = git(o.Root, "log", "-1", "--format=%ct", o.Revision); err != nil {
			return fmt.Errorf("no -source-date-epoch and no commit time: %w", err)
		}
	}
	secs, err := strconv.ParseInt(*epoch, 10, 64)
	if err != nil {
		return fmt.Errorf("source date epoch %q: %w", *epoch, err)
	}
	o.Created = time.Unix(secs, 0).UTC()

	if len(wraps) > 0 {
		archives, err := wrapAll(o, wraps)
		for _, a := range archives {
			fmt.Fprintln(stdout, a)
		}
		return err
	}
	start := time.Now()
	built, err := build(o, stderr)
	if err != nil {
		return err
	}
	return summarize(stdout, built, time.Since(start))
}

// build compiles the binaries (unless o.BinDir has them) and writes the images.
func build(o options, log io.Writer) ([]builtImage, error) {
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	binDir := o.BinDir
	if binDir == "" {
		tmp, err := os.MkdirTemp("", "imagebuild-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		if err := buildBinaries(o, tmp, log); err != nil {
			return nil, err
		}
		binDir = tmp
	}
	return assemble(o, binDir)
}

// summarize prints each image's reference and digests: what a release notes and a user checks
// after pushing.
func summarize(w io.Writer, built []builtImage, took time.Duration) error {
	for _, b := range built {
		d, err := b.Index.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s@%s\n", b.Ref, d)
		for _, p := range b.Platforms {
			pd, err := p.Image.Digest()
			if err != nil {
				return err
			}
			size, err := compressedSize(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "  %-12s %s  %.1f MB compressed  %s\n", p.Platform, pd, float64(size)/1e6, filepath.Base(p.Archive))
		}
	}
	fmt.Fprintf(w, "built in %s\n", took.Round(100*time.Millisecond))
	return nil
}

func compressedSize(p builtPlatform) (int64, error) {
	layers, err := p.Image.Layers()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, l := range layers {
		s, err := l.Size()
		if err != nil {
			return 0, err
		}
		total += s
	}
	return total, nil
}

func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	b, err := cmd.Output()
	return strings.TrimSpace(string(b)), err
}
