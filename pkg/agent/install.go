package agent

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// installRunner downloads and unpacks the runner unless the template already has it.
func (a *Agent) installRunner(ctx context.Context) error {
	r := a.cfg.Runner
	if _, err := os.Stat(filepath.Join(r.Directory, r.RunScript)); err == nil {
		a.log.Info("runner already installed", "dir", r.Directory)
		return nil
	}
	if r.DownloadURL == "" {
		return fmt.Errorf("%s not found and no runner downloadURL configured", filepath.Join(r.Directory, r.RunScript))
	}
	a.log.Info("downloading runner", "url", r.DownloadURL)
	if err := os.MkdirAll(r.Directory, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(r.Directory, ".runner-*.tar.gz")
	if err != nil {
		return err
	}
	defer func() { _ = tmp.Close(); _ = os.Remove(tmp.Name()) }()
	if err := download(ctx, r.DownloadURL, tmp, r.SHA256); err != nil {
		return err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return untar(tmp, r.Directory)
}

// download writes url to w and checks its SHA-256 before anything is unpacked.
func download(ctx context.Context, url string, w io.Writer, wantSHA256 string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("downloading %s: %s", url, resp.Status)
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(w, h), resp.Body); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); !strings.EqualFold(got, wantSHA256) {
		return fmt.Errorf("runner package checksum mismatch: got sha256 %s, want %s", got, wantSHA256)
	}
	return nil
}

// maxEntries bounds the entries of a runner package; the real one has a few thousand.
const maxEntries = 100000

// untar unpacks a gzipped tarball into dir. Every write goes through an os.Root of dir, which
// resolves each path on the real filesystem and refuses any that leaves dir, so no entry, symlink
// (created earlier in the same archive or already there) or hard link can make the agent write
// outside it. Symlinks must also point inside dir, so the runner never follows one out of it.
func untar(r io.Reader, dir string) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	defer gz.Close()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(gz)
	var symlinks []string
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return checkSymlinks(root, symlinks)
		}
		if err != nil {
			return err
		}
		if n >= maxEntries {
			return fmt.Errorf("runner package has more than %d entries", maxEntries)
		}
		if err := extract(root, hdr, tr); err != nil {
			return errors.Join(fmt.Errorf("runner package: %s: %w", hdr.Name, err), checkSymlinks(root, symlinks))
		}
		if hdr.Typeflag == tar.TypeSymlink {
			symlinks = append(symlinks, filepath.Clean(hdr.Name))
		}
	}
}

// checkSymlinks removes every symlink of the package that, now that all entries are in place,
// leads out of root (each looked harmless when made, but a later one can change where an earlier
// one goes), and refuses the package if there was one. Dangling links inside are harmless.
func checkSymlinks(root *os.Root, names []string) error {
	var errs []error
	for _, name := range names {
		fi, err := root.Lstat(name)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			continue // replaced by a later entry
		}
		if _, err := root.Stat(name); err == nil || errors.Is(err, fs.ErrNotExist) {
			continue
		}
		errs = append(errs, fmt.Errorf("runner package: symlink %s leads out of the runner directory", name))
		if err := root.Remove(name); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// extract writes one entry under root. Other entry types (devices, FIFOs) are skipped.
func extract(root *os.Root, hdr *tar.Header, r io.Reader) error {
	name, err := entryPath(hdr.Name)
	if err != nil {
		return err
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		return root.MkdirAll(name, 0o755)
	case tar.TypeReg:
		return writeFile(root, name, r, hdr.FileInfo().Mode().Perm())
	case tar.TypeSymlink:
		if filepath.IsAbs(hdr.Linkname) {
			return fmt.Errorf("absolute symlink to %s", hdr.Linkname)
		}
		if _, err := entryPath(filepath.Join(filepath.Dir(name), hdr.Linkname)); err != nil {
			return fmt.Errorf("symlink to %s: %w", hdr.Linkname, err)
		}
		if err := mkdirParent(root, name); err != nil {
			return err
		}
		return root.Symlink(hdr.Linkname, name)
	case tar.TypeLink:
		old, err := entryPath(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hard link to %s: %w", hdr.Linkname, err)
		}
		// Only to a regular file this archive (or the directory) already has inside root.
		fi, err := root.Stat(old)
		if err != nil {
			return fmt.Errorf("hard link to %s: %w", hdr.Linkname, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("hard link to %s, which is not a regular file", hdr.Linkname)
		}
		if err := mkdirParent(root, name); err != nil {
			return err
		}
		return root.Link(old, name)
	}
	return nil
}

// entryPath is name cleaned and relative, or an error when it is absolute or climbs out.
func entryPath(name string) (string, error) {
	if filepath.IsAbs(name) {
		return "", fmt.Errorf("absolute path %q", name)
	}
	clean := filepath.Clean(name)
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q escapes the runner directory", name)
	}
	return clean, nil
}

func mkdirParent(root *os.Root, name string) error {
	if dir := filepath.Dir(name); dir != "." {
		return root.MkdirAll(dir, 0o755)
	}
	return nil
}

func writeFile(root *os.Root, name string, r io.Reader, perm os.FileMode) error {
	if err := mkdirParent(root, name); err != nil {
		return err
	}
	// Never write through an existing link: replace whatever is there.
	if fi, err := root.Lstat(name); err == nil && !fi.Mode().IsRegular() {
		if err := root.Remove(name); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
