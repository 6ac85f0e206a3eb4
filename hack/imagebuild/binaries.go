package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// buildBinaries cross-compiles the commands of specs for each platform into
// dir/<os>_<arch>/<command>, one `go build` per platform so the commands share the build cache
// and the work of their common packages.
func buildBinaries(o options, dir string, log io.Writer) error {
	ldflags := fmt.Sprintf("-s -w -X main.version=%s -X main.revision=%s", o.Version, o.Revision)
	for _, p := range o.Platforms {
		outDir := filepath.Join(dir, p.OS+"_"+p.Arch)
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			return err
		}
		args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", outDir + string(filepath.Separator)}
		for _, s := range o.Images {
			args = append(args, "./cmd/"+s.Command)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = o.Root
		cmd.Stdout, cmd.Stderr = log, log
		cmd.Env = append(os.Environ(),
			"CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch,
			// Fixed instruction-set levels: a GOAMD64 or GOARM64 in someone's environment would
			// otherwise change the binaries and so the digests.
			"GOAMD64=v1", "GOARM64=v8.0",
		)
		fmt.Fprintf(log, "go %s (%s)\n", strings.Join(args, " "), p)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building for %s: %w", p, err)
		}
	}
	return nil
}
