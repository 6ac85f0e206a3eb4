package hyperv

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv/module"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// FuzzScriptsCarryFoldersAsData: whatever a folder holds, each script that names it (the module
// call, the probe and the deploy's preparation) reads, by PowerShell's tokenizer
// (hvsim.LexPowerShell), as the same code as with the default folder: the same text outside its
// strings and as many strings. Only a string's value changes, and the folder comes back whole
// from it. So a folder can neither end a string nor add a command.
func FuzzScriptsCarryFoldersAsData(f *testing.F) {
	f.Add(`C:\HF` + "\u2019; Stop-VM -Name db -TurnOff; \u2019x")
	f.Fuzz(func(t *testing.T, dir string) {
		if !utf8.ValidString(dir) {
			return // A script reaches the host as UTF-16: invalid UTF-8 cannot be sent as itself.
		}
		call := func(root string) string {
			s, err := callScript(root, fnInventory, struct{}{})
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		for name, tc := range map[string]struct {
			want, got string
			folders   []string
		}{
			"call":    {call(DefaultModuleRoot), call(dir), []string{moduleDir(dir) + `\` + module.Name + ".psd1"}},
			"probe":   {probeScript(DefaultModuleRoot), probeScript(dir), []string{moduleDir(dir)}},
			"prepare": {prepareScript(moduleDir(DefaultModuleRoot), DefaultSeedDirectory), prepareScript(moduleDir(dir), dir), []string{moduleDir(dir), dir}},
		} {
			wantCode, _ := codeAndTexts(t, tc.want)
			gotCode, texts := codeAndTexts(t, tc.got)
			if gotCode != wantCode {
				t.Fatalf("%s script for folder %q reads as other code:\n%s\nwant\n%s", name, dir, gotCode, wantCode)
			}
			if !slices.Equal(texts, tc.folders) {
				t.Fatalf("%s script for folder %q carries %q, want %q", name, dir, texts, tc.folders)
			}
		}
	})
}

// codeAndTexts reads a script as PowerShell does and returns its text outside single-quoted
// strings (each string written as §) and the values it decodes from base64 (psText).
func codeAndTexts(t *testing.T, script string) (string, []string) {
	tokens, err := hvsim.LexPowerShell(script)
	if err != nil {
		t.Fatalf("script does not lex: %v\n%s", err, script)
	}
	var code strings.Builder
	var texts []string
	for _, tok := range tokens {
		if tok.Kind != hvsim.PSSingleQuoted {
			code.WriteString(tok.Text)
			continue
		}
		if strings.HasSuffix(code.String(), "FromBase64String(") {
			raw, err := base64.StdEncoding.DecodeString(tok.Value)
			if err != nil {
				t.Fatalf("%q is not base64", tok.Value)
			}
			texts = append(texts, string(raw))
		}
		code.WriteString("§")
	}
	return code.String(), texts
}
