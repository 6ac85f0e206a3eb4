package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	nonrootUID = 65532
	caPath     = "etc/ssl/certs/ca-certificates.crt"
)

// entry is one file or directory of a layer.
type entry struct {
	Name     string // relative to /, directories end in /
	Mode     int64
	UID, GID int
	Data     []byte
}

// baseEntries are what every image holds besides its binary: the CA bundle Go reads from
// /etc/ssl/certs, the non-root user the pods run as (so tools resolve 65532 to a name), and /tmp,
// the mount point of the pods' scratch emptyDir. No shell, no package database.
func baseEntries(caBundle []byte) []entry {
	return []entry{
		{Name: "etc/", Mode: 0o755},
		{Name: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{Name: "etc/ssl/", Mode: 0o755},
		{Name: "etc/ssl/certs/", Mode: 0o755},
		{Name: caPath, Mode: 0o644, Data: caBundle},
		{Name: "home/", Mode: 0o755},
		{Name: "home/nonroot/", Mode: 0o700, UID: nonrootUID, GID: nonrootUID},
		{Name: "tmp/", Mode: 0o1777},
	}
}

// layer writes entries as a gzipped tar whose bytes depend on the entries and mtime alone:
// entries sorted by name, fixed modes and owners, no user or group names, one timestamp, and a
// gzip header without name or time.
func layer(entries []entry, mtime time.Time) (v1.Layer, error) {
	sorted := append([]entry(nil), entries...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var buf bytes.Buffer
	// The default level: the best saves 0.5% of the size for three times the time.
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	zw.Header = gzip.Header{OS: 255} // unknown OS, no name, no modification time
	tw := tar.NewWriter(zw)
	for _, e := range sorted {
		h := &tar.Header{
			Name:    e.Name,
			Mode:    e.Mode,
			Uid:     e.UID,
			Gid:     e.GID,
			ModTime: mtime.UTC().Truncate(time.Second),
			Format:  tar.FormatPAX,
		}
		if e.Name[len(e.Name)-1] == '/' {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// binaryLayer holds the command at the image's root, where the Deployments' command lines find it.
func binaryLayer(path, name string, mtime time.Time) (v1.Layer, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return layer([]entry{{Name: name, Mode: 0o755, Data: b}}, mtime)
}
