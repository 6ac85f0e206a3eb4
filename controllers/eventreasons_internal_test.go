package controllers

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// literalReason finds an Event recorded with a string literal as its type or reason.
var literalReason = regexp.MustCompile(`Recorder\.(?:Event|Eventf|AnnotatedEventf)\([^,]+,\s*("[^"]*"|[^,]+,\s*"[^"]*")`)

// TestEventReasonsAreConstants keeps every Event reason of every controller package (and type) a named constant, as condition
// reasons are: consumers, alerts and tests match them by name, and a reason spelled in one place
// cannot drift from its documentation in api/.
func TestEventReasonsAreConstants(t *testing.T) {
	var files []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("found %d Go files under controllers/; the walk is broken", len(files))
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range literalReason.FindAllString(string(src), -1) {
			t.Errorf("%s: an Event with a literal type or reason: %s (name it in api/.../events.go)", f, m)
		}
	}
}
