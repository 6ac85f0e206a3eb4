package devfleet

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// buildBinaries builds the in-VM agent and the platform's fake runner (or runnerPkg, when set)
// into dir. go build's cache makes a rebuild of unchanged sources take a second or two.
func buildBinaries(ctx context.Context, repoRoot, dir, platform, runnerPkg string) (agent, runner string, err error) {
	agent, runner = filepath.Join(dir, "hyperfleet-agent"), filepath.Join(dir, "fakerunner")
	defaultPkg := "./test/fakerunner"
	switch platform {
	case PlatformGitLab:
		runner, defaultPkg = filepath.Join(dir, "fakegitlabrunner"), "./test/fakegitlabrunner"
	case PlatformBuildkite:
		runner, defaultPkg = filepath.Join(dir, "fakebuildkiteagent"), "./test/fakebuildkiteagent"
	}
	if runnerPkg == "" {
		runnerPkg = defaultPkg
	}
	for bin, pkg := range map[string]string{agent: "./cmd/hyperfleet-agent", runner: runnerPkg} {
		bctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		cmd := exec.CommandContext(bctx, "go", "build", "-o", bin, pkg)
		cmd.Dir = repoRoot
		// Static binaries, as they would be inside a VM image.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		out, berr := cmd.CombinedOutput()
		cancel()
		if berr != nil {
			return "", "", fmt.Errorf("building %s: %v: %s", pkg, berr, out)
		}
	}
	return agent, runner, nil
}

// runnerPackage packs the fake runner as the platform's runner program (run.sh, laid out like the
// GitHub Actions runner's tarball, gitlab-runner or buildkite-agent) and returns it with its sha256.
func runnerPackage(fakeRunner, platform string) ([]byte, string, error) {
	name := "run.sh"
	switch platform {
	case PlatformGitLab:
		name = "gitlab-runner"
	case PlatformBuildkite:
		name = "buildkite-agent"
	}
	data, err := os.ReadFile(fakeRunner)
	if err != nil {
		return nil, "", err
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		return nil, "", err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(data))}); err != nil {
		return nil, "", err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, "", err
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	if err := gz.Close(); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), hex.EncodeToString(sum[:]), nil
}

// serveArtifacts serves the runner package at /actions-runner.tar.gz on loopback until ctx ends,
// standing in for the GitHub release download a real VM would make.
func serveArtifacts(ctx context.Context, pkg []byte) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /actions-runner.tar.gz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/gzip")
		_, _ = w.Write(pkg)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return "http://" + l.Addr().String() + "/actions-runner.tar.gz", nil
}
