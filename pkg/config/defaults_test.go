package config

import (
	"bufio"
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// documentedSetting is one row of docs/install.md's configuration reference.
type documentedSetting struct{ env, def string }

// configurationReference reads the flag, environment variable and default of every row of the
// configuration reference. A default that is not a literal (none, all namespaces, the pod's
// namespace) reads as the empty string.
func configurationReference(t *testing.T) map[string]documentedSetting {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "install.md"))
	if err != nil {
		t.Fatalf("reading docs/install.md: %v", err)
	}
	rows := map[string]documentedSetting{}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Configuration reference"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `--") {
			continue
		}
		cells := strings.Split(line, "|")
		flagName := strings.TrimPrefix(strings.Trim(strings.TrimSpace(cells[1]), "`"), "--")
		env := strings.Trim(strings.TrimSpace(cells[2]), "`")
		def := ""
		if c := strings.TrimSpace(cells[3]); strings.HasPrefix(c, "`") {
			def = strings.SplitN(c[1:], "`", 2)[0]
		}
		rows[flagName] = documentedSetting{env: env, def: def}
	}
	return rows
}

// literalFallbacks are documented defaults that name where an empty value is taken from rather
// than a value Bind sets.
var literalFallbacks = map[string]string{
	"spire-workload-api-address": "SPIFFE_ENDPOINT_SOCKET",
}

// TestDefaultsMatchTheConfigurationReference keeps each setting's one default, its flag help and
// docs/install.md in step: a default changed in Bind but not in the reference (or the reverse), or
// a setting with no row, fails here.
func TestDefaultsMatchTheConfigurationReference(t *testing.T) {
	documented := configurationReference(t)
	m := &Manager{}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	check := m.Bind(fs, func(string) string { return "" })
	NewWithT(t).Expect(fs.Parse(nil)).To(Succeed())
	NewWithT(t).Expect(check()).To(Succeed())

	var flags []string
	fs.VisitAll(func(f *flag.Flag) {
		flags = append(flags, f.Name)
		t.Run(f.Name, func(t *testing.T) {
			g := NewWithT(t)
			doc, ok := documented[f.Name]
			g.Expect(ok).To(BeTrue(), "docs/install.md's configuration reference has no row for --%s", f.Name)
			g.Expect(f.Usage).To(HaveSuffix("(env "+doc.env+")"), "flag help and docs name different variables")
			// The parsed configuration holds the flag's default: nothing applies another one.
			g.Expect(f.Value.String()).To(Equal(f.DefValue))
			want := doc.def
			if fallback, ok := literalFallbacks[f.Name]; ok {
				g.Expect(want).To(Equal(fallback))
				want = ""
			}
			if d, err := time.ParseDuration(f.DefValue); err == nil && want != "" {
				g.Expect(time.ParseDuration(want)).To(Equal(d), "default of --%s", f.Name)
				return
			}
			g.Expect(f.DefValue).To(Equal(want), "default of --%s", f.Name)
		})
	})
	NewWithT(t).Expect(documented).To(HaveLen(len(flags)), "docs/install.md documents a flag Bind does not declare")
}

func TestRepairIntervalDefaultIsDeclaredOnce(t *testing.T) {
	g := NewWithT(t)
	m, err := parse(nil, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.RepairInterval).To(Equal(DefaultRepairInterval))
	g.Expect(DefaultRepairInterval).To(Equal(time.Minute))
}
