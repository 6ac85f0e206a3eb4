package agent

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// entry is one tar entry: a regular file when link and hardlink are empty.
type entry struct {
	name, body, symlink, hardlink string
	dir                           bool
}

func tarball(t testing.TB, entries []entry) []byte {
	t.Helper()
	b, err := buildTarball(entries)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func buildTarball(entries []entry) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		switch {
		case e.dir:
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeDir, 0o755, 0
		case e.symlink != "":
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeSymlink, e.symlink, 0
		case e.hardlink != "":
			hdr.Typeflag, hdr.Linkname, hdr.Size = tar.TypeLink, e.hardlink, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if hdr.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// TestUntarStaysInside plays a runner package crafted to make the agent (root in the VM) write
// outside the runner directory: nothing may appear or change outside it.
func TestUntarStaysInside(t *testing.T) {
	tests := []struct {
		name    string
		entries func(outside string) []entry
	}{
		{name: "symlink to an absolute directory, then a file through it", entries: func(outside string) []entry {
			return []entry{{name: "x", symlink: outside}, {name: "x/evil", body: "pwned"}}
		}},
		{name: "relative symlink climbing out, then a file through it", entries: func(string) []entry {
			return []entry{{name: "x", symlink: "../outside"}, {name: "x/evil", body: "pwned"}}
		}},
		{name: "chained symlinks each harmless on paper", entries: func(string) []entry {
			// a -> . and then a/b -> .. ; lexically both stay inside, but a/b is really ./b -> ..
			return []entry{{name: "a", symlink: "."}, {name: "a/b", symlink: ".."}, {name: "b/outside/evil", body: "pwned"}}
		}},
		{name: "nested symlink into a parent symlink", entries: func(string) []entry {
			return []entry{{name: "d/", dir: true}, {name: "d/up", symlink: ".."}, {name: "d/up/up2", symlink: "../outside"},
				{name: "up2/evil", body: "pwned"}}
		}},
		{name: "entry name climbing out", entries: func(string) []entry {
			return []entry{{name: "../outside/evil", body: "pwned"}}
		}},
		{name: "hard link to a file outside, then written", entries: func(outside string) []entry {
			return []entry{{name: "h", hardlink: filepath.Join(outside, "victim")}, {name: "h", body: "pwned"}}
		}},
		{name: "hard link climbing out, then written", entries: func(string) []entry {
			return []entry{{name: "h", hardlink: "../outside/victim"}, {name: "h", body: "pwned"}}
		}},
		{name: "hard link through a chained symlink", entries: func(string) []entry {
			return []entry{{name: "a", symlink: "."}, {name: "a/b", symlink: ".."}, {name: "h", hardlink: "b/outside/victim"},
				{name: "h", body: "pwned"}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			parent := t.TempDir()
			dir, outside := filepath.Join(parent, "runner"), filepath.Join(parent, "outside")
			g.Expect(os.Mkdir(dir, 0o755)).To(Succeed())
			g.Expect(os.Mkdir(outside, 0o755)).To(Succeed())
			g.Expect(os.WriteFile(filepath.Join(outside, "victim"), []byte("original"), 0o644)).To(Succeed())

			err := untar(bytes.NewReader(tarball(t, tt.entries(outside))), dir)
			g.Expect(err).To(HaveOccurred(), "the package is refused")
			g.Expect(outsideState(t, parent, dir)).To(Equal(map[string]string{"outside/victim": "original"}),
				"nothing outside the runner directory was written")
		})
	}
}

// outsideState is every file under parent but outside dir, with its content.
func outsideState(t *testing.T, parent, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(parent, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == dir {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			rel, _ := filepath.Rel(parent, path)
			body, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files[rel] = string(body)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestUntarUnpacksARunnerPackage: what real packages contain still unpacks.
func TestUntarUnpacksARunnerPackage(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	err := untar(bytes.NewReader(tarball(t, []entry{
		{name: "./", dir: true},
		{name: "bin/", dir: true},
		{name: "bin/Runner.Listener", body: "listener"},
		{name: "run.sh", body: "#!/bin/sh\n"},
		{name: "bin/current", symlink: "Runner.Listener"},
		{name: "externals/node/bin/node", body: "node"},
		{name: "externals/node/bin/nodejs", hardlink: "externals/node/bin/node"},
		{name: "run.sh", body: "#!/bin/sh\necho replaced\n"},
	})), dir)
	g.Expect(err).NotTo(HaveOccurred())
	for name, want := range map[string]string{
		"bin/Runner.Listener": "listener", "bin/current": "listener", "run.sh": "#!/bin/sh\necho replaced\n",
		"externals/node/bin/nodejs": "node",
	} {
		body, err := os.ReadFile(filepath.Join(dir, name))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(body)).To(Equal(want), name)
	}
	link, err := os.Readlink(filepath.Join(dir, "bin/current"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(link).To(Equal("Runner.Listener"))
}
