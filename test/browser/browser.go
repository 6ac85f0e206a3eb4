// Package browser starts the headless Chromium the browser tests drive with chromedp: Debian's
// Chromium, a fresh profile per test.
package browser

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// Chromium finds Debian's Chromium (CHROMIUM overrides the path). Without it a browser test is
// skipped on a workstation and fails in CI, which installs it (hack/prereqs.sh).
func Chromium(t testing.TB) string {
	t.Helper()
	path := os.Getenv("CHROMIUM")
	if path == "" {
		path = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Chromium not found at %s: hack/prereqs.sh installs it", path)
		}
		t.Skipf("Chromium not found at %s (apt-get install chromium)", path)
	}
	return path
}

// NewContext starts headless Chromium with a fresh profile, until the test ends. extra adds
// flags (a test's own ingress with a certificate the browser cannot know, for one).
func NewContext(t testing.TB, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(opts, extra...)...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	return ctx
}
