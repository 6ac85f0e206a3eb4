package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestLevels(t *testing.T) {
	cases := []struct {
		level      string
		wantDebug  bool
		wantInfo   bool
		wantErr    bool
		stackTrace bool
	}{
		{level: "DEBUG", wantDebug: true, wantInfo: true, wantErr: true, stackTrace: true},
		{level: "", wantInfo: true, wantErr: true},
		{level: "info", wantInfo: true, wantErr: true},
		{level: "WARN", wantErr: true},
		{level: "ERROR", wantErr: true},
	}
	for _, tc := range cases {
		t.Run("level="+tc.level, func(t *testing.T) {
			g := NewWithT(t)
			var buf bytes.Buffer
			log, err := New(tc.level, &buf)
			g.Expect(err).NotTo(HaveOccurred())
			log.V(1).Info("debug line")
			log.Info("info line", "vmid", 100)
			log.Error(errors.New("boom"), "error line")
			out := buf.String()
			g.Expect(strings.Contains(out, "debug line")).To(Equal(tc.wantDebug))
			g.Expect(strings.Contains(out, "info line")).To(Equal(tc.wantInfo))
			g.Expect(strings.Contains(out, "error line")).To(Equal(tc.wantErr))
			g.Expect(strings.Contains(out, `"stacktrace"`)).To(Equal(tc.stackTrace))
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				var m map[string]any
				g.Expect(json.Unmarshal([]byte(line), &m)).To(Succeed(), "every line is JSON: %s", line)
			}
		})
	}
}

func TestUnknownLevel(t *testing.T) {
	g := NewWithT(t)
	_, err := New("LOUD", &bytes.Buffer{})
	g.Expect(err).To(MatchError(ContainSubstring("use DEBUG, INFO, WARN or ERROR")))
}
