package realguest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hyperfleet-io/hyperfleet/internal/devfleet"
	"github.com/hyperfleet-io/hyperfleet/test/testenv"
)

var (
	fleet *devfleet.Fleet
	// skipReason says why the tests cannot run here, when they cannot.
	skipReason string
	// templateBuild is how long hack/template.sh took (a cached image: about a second).
	templateBuild time.Duration
	// fleetImage is the runner template every guest boots.
	fleetImage string
)

// labels are the runs-on labels of the real-guest pool's jobs.
var labels = []string{"linux", "x64", "real-guest"}

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("realguest: skipped in -short mode")
		os.Exit(0)
	}
	image, err := guestImage()
	if err != nil {
		fmt.Fprintln(os.Stderr, "realguest:", err)
		os.Exit(1)
	}
	if image == "" {
		fmt.Println("realguest: skipped:", skipReason)
	}
	fleetImage = image
	code := m.Run()
	if fleet != nil {
		fleet.Stop()
		if code != 0 {
			// The component, VM and guest console logs explain a failure; keep them.
			fmt.Fprintf(os.Stderr, "realguest: logs kept in %s\n", fleetStateDir)
		} else {
			_ = os.RemoveAll(fleetStateDir)
		}
	}
	os.Exit(code)
}

var (
	fleetOnce     sync.Once
	fleetErr      error
	fleetStateDir string
)

// startFleet starts the local fleet whose Proxmox simulator boots real guests, once for the tests
// that need it.
func startFleet(t *testing.T) *devfleet.Fleet {
	t.Helper()
	fleetOnce.Do(func() {
		if fleetStateDir, fleetErr = os.MkdirTemp("", "hyperfleet-realguest-"); fleetErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		fleet, fleetErr = devfleet.Start(ctx, devfleet.Options{
			StateDir:      fleetStateDir,
			GuestImage:    fleetImage,
			RunnerPackage: "./test/realguest/guestrunner",
			Pool:          devfleet.PoolOptions{Min: 0, Max: 1, Labels: labels},
			SweepInterval: 2 * time.Second,
			NoConsole:     true,
		})
	})
	if fleetErr != nil {
		t.Fatalf("starting the local fleet: %v", fleetErr)
	}
	return fleet
}

// guestImage finds QEMU and builds (or reuses) the runner template. Where either cannot be had it
// returns "" and sets skipReason; a template build that fails for another reason is an error.
func guestImage() (string, error) {
	if image := os.Getenv("HYPERFLEET_GUEST_IMAGE"); image != "" {
		return image, nil
	}
	for cmd, pkg := range map[string]string{"qemu-system-x86_64": "qemu-system-x86", "qemu-img": "qemu-utils", "socat": "socat"} {
		if _, err := exec.LookPath(cmd); err != nil {
			skipReason = fmt.Sprintf("%s is not installed (Debian package %s; hack/prereqs.sh installs it)", cmd, pkg)
			return "", nil
		}
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "template.sh"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	templateBuild = time.Since(start)
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit) && exit.ExitCode() == 3:
		// The script says this machine cannot build the image (not root, no loop device, ...).
		skipReason = "the runner template cannot be built here: " + strings.TrimSpace(stderr.String())
		return "", nil
	case err != nil:
		return "", fmt.Errorf("hack/template.sh: %v\n%s", err, stderr.String())
	}
	fmt.Print(stderr.String())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	return lines[len(lines)-1], nil
}
