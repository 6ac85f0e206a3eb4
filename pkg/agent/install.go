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

// untar unpacks a gzipped tarball into dir, refusing entries that would land outside it.
func untar(r io.Reader, dir string) error {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return err
	}
	defer gz.Close()
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		target, err := within(dir, hdr.Name)
		if err != nil {
			return err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			err = writeFile(target, tr, hdr.FileInfo().Mode().Perm())
		case tar.TypeSymlink:
			if filepath.IsAbs(hdr.Linkname) {
				return fmt.Errorf("runner package: absolute symlink %s", hdr.Name)
			}
			if _, err = within(dir, filepath.Join(filepath.Dir(hdr.Name), hdr.Linkname)); err == nil {
				if err = os.MkdirAll(filepath.Dir(target), 0o755); err == nil {
					err = os.Symlink(hdr.Linkname, target)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("runner package: %s: %w", hdr.Name, err)
		}
	}
}

func within(dir, name string) (string, error) {
	target := filepath.Join(dir, name)
	if rel, err := filepath.Rel(dir, target); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("runner package entry %q escapes %s", name, dir)
	}
	return target, nil
}

func writeFile(path string, r io.Reader, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
