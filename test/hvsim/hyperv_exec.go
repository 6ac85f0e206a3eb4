package hvsim

import (
	"context"
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// HostExecutor runs the commands a WS-Man server receives for one simulated Hyper-V host.
type HostExecutor struct {
	hv   *HyperV
	host string
}

var _ Executor = (*HostExecutor)(nil)

// Executor returns the executor of host, for the WS-Man endpoint that stands for that host.
func (h *HyperV) Executor(host string) *HostExecutor { return &HostExecutor{hv: h, host: host} }

// The scripts the Hyper-V provider sends, and nothing else. They are matched against the script
// as PowerShell reads it (canonicalScript): its strings rewritten in one spelling, the text
// between them as sent. Paths travel as base64 text decoded on the host (hvTextRe). Anything else
// is answered as PowerShell answers a command it does not know, and its statements are recorded
// (ForeignStatements).
const hvText = `\[Text\.Encoding\]::UTF8\.GetString\(\[Convert\]::FromBase64String\('([A-Za-z0-9+/=]*)'\)\)`

var (
	hvTextRe = regexp.MustCompile(hvText)
	hvCallRe = regexp.MustCompile(`^\$ErrorActionPreference = 'Stop'\n` +
		`Import-Module -Name \(` + hvText + `\) -RequiredVersion '([0-9.]+)'\n` +
		`([A-Za-z]+-HF[A-Za-z]+) -InputBase64 '([A-Za-z0-9+/=]*)'\n$`)
	hvProbeRe = regexp.MustCompile(`^\$ErrorActionPreference = 'Stop'\n` +
		`\$dir = ` + hvText + `\n` +
		regexp.QuoteMeta(`$r = @{ Version = ''; Sha256 = '' }`+"\n"+
			`$psd = Join-Path $dir 'HyperFleetHyperV.psd1'`+"\n"+
			`$psm = Join-Path $dir 'HyperFleetHyperV.psm1'`+"\n"+
			`if ((Test-Path -LiteralPath $psd) -and (Test-Path -LiteralPath $psm)) {`+"\n"+
			`    $r.Version = [string](Import-PowerShellDataFile -Path $psd).ModuleVersion`+"\n"+
			`    $r.Sha256 = (Get-FileHash -LiteralPath $psm -Algorithm SHA256).Hash.ToLowerInvariant()`+"\n"+
			`}`+"\n"+
			`ConvertTo-Json -InputObject $r -Compress`+"\n") + `$`)
	hvPrepareRe = regexp.MustCompile(`^\$ErrorActionPreference = 'Stop'\n` +
		`foreach \(\$d in @\(((?:` + hvText + `(?:, )?)+)\)\) \{ New-Item -ItemType Directory -Force -Path \$d \| Out-Null \}\n$`)
)

// Run executes one command line for user on the executor's host.
func (e *HostExecutor) Run(ctx context.Context, user string, commandLine string, stdin []byte) (stdout, stderr []byte, exitCode int) {
	if d := e.hv.cfg.Latency; d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, psErrorRecord("The pipeline has been stopped.", "OperationStopped", "PipelineStopped"), 1
		}
	}
	script, ok, err := DecodePowerShell(commandLine)
	if !ok {
		return CmdNotRecognized(commandLine)
	}
	if err != nil {
		return BadEncodedCommand()
	}
	original := script
	tokens, err := LexPowerShell(script)
	if err != nil {
		// PowerShell parses the whole script first: nothing of it runs.
		return nil, psErrorRecord(err.Error(), "ParserError", "TerminatorExpectedAtEndOfString"), 1
	}
	script = canonicalScript(tokens)
	script = strings.TrimPrefix(script, "$ProgressPreference = 'SilentlyContinue';")
	script = strings.TrimLeft(script, " \r\n")
	script = strings.ReplaceAll(script, "\r\n", "\n")
	switch {
	case hvCallRe.MatchString(script):
		m := hvCallRe.FindStringSubmatch(script)
		psd1, ok := decodeText(m[1])
		if !ok {
			return nil, psErrorRecord(errNotBase64, "NotSpecified", "FormatException"), 1
		}
		return e.call(ctx, psd1, m[2], m[3], m[4])
	case hvProbeRe.MatchString(script):
		dir, ok := decodeText(hvProbeRe.FindStringSubmatch(script)[1])
		if !ok {
			return nil, psErrorRecord(errNotBase64, "NotSpecified", "FormatException"), 1
		}
		return e.probe(dir)
	case hvPrepareRe.MatchString(script):
		m := hvPrepareRe.FindStringSubmatch(script)
		var dirs []string
		for _, q := range hvTextRe.FindAllStringSubmatch(m[1], -1) {
			d, ok := decodeText(q[1])
			if !ok {
				return nil, psErrorRecord(errNotBase64, "NotSpecified", "FormatException"), 1
			}
			dirs = append(dirs, d)
		}
		return e.prepare(dirs)
	}
	if out, errOut, code, ok := e.upload(script, stdin); ok {
		return out, errOut, code
	}
	e.hv.recordForeign(e.host, PSStatements(tokens))
	word := firstWord(strings.TrimPrefix(script, "$ErrorActionPreference = 'Stop'\n"))
	return nil, psCommandNotFound(original, word), 1
}

// unquote reads a single-quoted string's content in canonicalScript's spelling.
func unquote(s string) string { return strings.ReplaceAll(s, "''", "'") }

const errNotBase64 = `Exception calling "FromBase64String" with "1" argument(s): "The input is not a valid Base-64 string as it contains a non-base 64 character, more than two padding characters, or an illegal character among the padding characters."`

// decodeText is what [Text.Encoding]::UTF8.GetString([Convert]::FromBase64String(s)) gives.
func decodeText(s string) (string, bool) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", false
	}
	return strings.ToValidUTF8(string(raw), "\uFFFD"), true
}

// psErrorRecord renders an error record the way powershell.exe writes its error stream when its
// output is redirected: CLIXML, preceded by the progress record of its first module load.
func psErrorRecord(message, category, errorID string) []byte {
	return psErrorLines(message, "At line:1 char:1", "    + CategoryInfo          : "+category+": (:) [], "+errorID,
		"    + FullyQualifiedErrorId : "+errorID)
}

// psCommandNotFound is Windows PowerShell 5.1's whole error record for a command it cannot find in
// script: the message prefixed with the command's name, its position, the line with the name
// underlined, the category naming the command, and exit code 1 from powershell.exe: the layout
// of Windows PowerShell 5.1's error view as Microsoft's documentation shows its records, one CLIXML
// Error string per line. The simulator does not wrap lines at the console's width as Windows does.
func psCommandNotFound(script, name string) []byte {
	lineNo, col, text := 1, 1, name
	if at := strings.Index(script, name); at >= 0 {
		before := script[:at]
		lineNo = strings.Count(before, "\n") + 1
		start := strings.LastIndex(before, "\n") + 1
		col = len([]rune(script[start:at])) + 1
		end := strings.IndexByte(script[at:], '\n')
		if end < 0 {
			end = len(script) - at
		}
		text = strings.TrimRight(script[start:at+end], "\r")
	}
	return psCommandNotFoundAt(name, text, lineNo, col)
}

func psCommandNotFoundAt(name, line string, lineNo, col int) []byte {
	return psErrorLines(
		fmt.Sprintf("%s : The term '%s' is not recognized as the name of a cmdlet, function, script file, or operable program. "+
			"Check the spelling of the name, or if a path was included, verify that the path is correct and try again.", name, name),
		fmt.Sprintf("At line:%d char:%d", lineNo, col),
		"+ "+line,
		"+ "+strings.Repeat(" ", col-1)+strings.Repeat("~", max(len([]rune(name)), 1)),
		"    + CategoryInfo          : ObjectNotFound: ("+name+":String) [], CommandNotFoundException",
		"    + FullyQualifiedErrorId : CommandNotFoundException")
}

// psErrorLines writes the lines of one error record, then the blank line PowerShell ends it with.
func psErrorLines(lines ...string) []byte {
	var b strings.Builder
	b.WriteString("#< CLIXML\r\n")
	b.WriteString(`<Objs Version="1.1.0.1" xmlns="http://schemas.microsoft.com/powershell/2004/04">`)
	b.WriteString(`<Obj S="progress" RefId="0"><TN RefId="0"><T>System.Management.Automation.PSCustomObject</T><T>System.Object</T></TN><MS>` +
		`<I64 N="SourceId">1</I64><PR N="Record"><AV>Preparing modules for first use.</AV><AI>0</AI><Nil /><PI>-1</PI><PC>-1</PC><T>Completed</T><SR>-1</SR><SD> </SD></PR></MS></Obj>`)
	for _, l := range append(lines, " ") {
		b.WriteString(`<S S="Error">` + clixmlEscape(l) + "_x000D__x000A_</S>")
	}
	b.WriteString("</Objs>")
	return []byte(b.String())
}

func clixmlEscape(s string) string {
	s = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
	s = strings.ReplaceAll(s, "\r", "_x000D_")
	return strings.ReplaceAll(s, "\n", "_x000A_")
}

// probe answers the module probe for dir.
func (e *HostExecutor) probe(dir string) ([]byte, []byte, int) {
	e.hv.mu.Lock()
	defer e.hv.mu.Unlock()
	hh := e.hv.hosts[e.host]
	e.hv.calls[e.host+"/probe"]++
	version, sum := "", ""
	psd, okd := hh.files[key(dir+`\HyperFleetHyperV.psd1`)]
	psm, okm := hh.files[key(dir+`\HyperFleetHyperV.psm1`)]
	if okd && okm {
		version = manifestVersion(psd.data)
		sum = sha256Hex(psm.data)
	}
	return []byte(`{"Version":"` + version + `","Sha256":"` + sum + `"}` + "\r\n"), nil, 0
}

// prepare creates directories (the simulator keeps no directory entries: any path is writable).
func (e *HostExecutor) prepare(dirs []string) ([]byte, []byte, int) {
	e.hv.mu.Lock()
	defer e.hv.mu.Unlock()
	e.hv.calls[e.host+"/prepare"]++
	for _, d := range dirs {
		if !isAbsWindowsPath(d) {
			return nil, psErrorRecord(fmt.Sprintf("New-Item : Cannot find drive. A drive with the name '%s' does not exist.", d), "ObjectNotFound", "DriveNotFound,Microsoft.PowerShell.Commands.NewItemCommand"), 1
		}
	}
	return nil, nil, 0
}

var manifestVersionRe = regexp.MustCompile(`(?m)^\s*ModuleVersion\s*=\s*'([^']*)'`)

func manifestVersion(psd1 []byte) string {
	if m := manifestVersionRe.FindSubmatch(psd1); m != nil {
		return string(m[1])
	}
	return ""
}

var manifestExportsRe = regexp.MustCompile(`'([A-Za-z]+-HF[A-Za-z]+)'`)

// manifestExports lists the functions a manifest exports.
func manifestExports(psd1 []byte) map[string]bool {
	out := map[string]bool{}
	for _, m := range manifestExportsRe.FindAllSubmatch(psd1, -1) {
		out[string(m[1])] = true
	}
	return out
}

var absWindowsPathRe = regexp.MustCompile(`^[A-Za-z]:\\|^\\\\[^\\]+\\[^\\]+`)

func isAbsWindowsPath(p string) bool { return absWindowsPathRe.MatchString(p) }
