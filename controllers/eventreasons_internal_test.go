package controllers

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// literalReason finds an Event recorded with a string literal as its type or reason.
var literalReason = regexp.MustCompile(`Recorder\.(?:Event|Eventf|AnnotatedEventf)\([^,]+,\s*("[^"]*"|[^,]+,\s*"[^"]*")`)

// TestEventReasonsAreConstants keeps every Event reason (and type) a named constant, as condition
// reasons are: consumers, alerts and tests match them by name, and a reason spelled in one place
// cannot drift from its documentation in api/.
func TestEventReasonsAreConstants(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range literalReason.FindAllString(string(src), -1) {
			t.Errorf("%s: an Event with a literal type or reason: %s (name it in api/.../events.go)", f, m)
		}
	}
}
