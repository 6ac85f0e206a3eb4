package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzUntar unpacks runner packages made from a small script, one entry per line: "f name" (a
// file), "d name" (a directory), "l name>target" (a symlink), "h name>target" (a hard link). Next
// to the runner directory sit an outside directory and a file; whatever the package, untar must
// not panic, must leave them as they were, and must leave no symlink pointing out of the directory.
func FuzzUntar(f *testing.F) {
	for _, seed := range []string{
		"d bin/\nf bin/Runner.Listener\nl bin/current>Runner.Listener\nh bin/copy>bin/Runner.Listener\nf run.sh",
		"l x>OUTSIDE\nf x/evil",
		"l x>../outside\nf x/evil",
		"l a>.\nl a/b>..\nf b/outside/evil",
		"d d/\nl d/up>..\nl d/up/up2>../outside\nf up2/evil",
		"f ../outside/evil",
		"h h>OUTSIDE/victim\nf h",
		"h h>../outside/victim\nf h",
		"l a>.\nl a/b>..\nh h>b/outside/victim\nf h",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, script string) {
		lines := strings.Split(script, "\n")
		if len(lines) > 16 || len(script) > 1024 {
			return
		}
		parent := t.TempDir()
		dir, outside := filepath.Join(parent, "runner"), filepath.Join(parent, "outside")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(outside, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(outside, "victim"), []byte("original"), 0o644); err != nil {
			t.Fatal(err)
		}
		var entries []entry
		for _, line := range lines {
			if len(line) < 3 || line[1] != ' ' {
				continue
			}
			name, target, _ := strings.Cut(strings.ReplaceAll(line[2:], "OUTSIDE", outside), ">")
			switch line[0] {
			case 'f':
				entries = append(entries, entry{name: name, body: "pwned"})
			case 'd':
				entries = append(entries, entry{name: name, dir: true})
			case 'l':
				entries = append(entries, entry{name: name, symlink: target})
			case 'h':
				entries = append(entries, entry{name: name, hardlink: target})
			}
		}
		if len(entries) == 0 {
			return
		}
		pkg, err := buildTarball(entries)
		if err != nil {
			return // not a tar archive can hold
		}
		_ = untar(bytes.NewReader(pkg), dir)

		got := outsideState(t, parent, dir)
		if len(got) != 1 || got["outside/victim"] != "original" {
			t.Fatalf("wrote outside the runner directory: %v", got)
		}
		if err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.Type()&os.ModeSymlink == 0 {
				return err
			}
			resolved, err := filepath.EvalSymlinks(path)
			if err != nil {
				return nil // dangling inside: harmless
			}
			if rel, err := filepath.Rel(dir, resolved); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				t.Fatalf("symlink %s leads out of the runner directory to %s", path, resolved)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}
