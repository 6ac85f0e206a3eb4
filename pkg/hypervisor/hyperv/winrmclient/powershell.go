package winrmclient

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/xml"
	"io"
	"strings"
	"sync"
	"unicode/utf16"

	"github.com/masterzen/winrm"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// MaxCommandLine is cmd.exe's limit on a command line. WinRM runs commands through cmd.exe
// (WINRS_SKIP_CMD_SHELL=FALSE), so an encoded script must fit in it: about 3,000 characters of
// PowerShell.
const MaxCommandLine = 8191

// maxOutput bounds what one run keeps of each stream; the rest is read and dropped.
const maxOutput = 64 << 20

// Result is the outcome of one PowerShell run.
type Result struct {
	Stdout, Stderr string
	ExitCode       int
}

// ErrorText is the run's error stream as readable text: PowerShell writes it as CLIXML
// (`#< CLIXML` then <Objs>) when its output is redirected, as it is over WinRM.
func (r Result) ErrorText() string { return StderrText(r.Stderr) }

// EncodeCommand returns the powershell.exe command line that runs script, as masterzen/winrm's
// Powershell does: $ProgressPreference silenced (progress records would arrive as CLIXML on
// stderr), then UTF-16LE, then base64 for -EncodedCommand.
func EncodeCommand(script string) string {
	units := utf16.Encode([]rune("$ProgressPreference = 'SilentlyContinue';" + script))
	raw := make([]byte, 2*len(units))
	for i, u := range units {
		binary.LittleEndian.PutUint16(raw[2*i:], u)
	}
	return "powershell.exe -EncodedCommand " + base64.StdEncoding.EncodeToString(raw)
}

// RunPowerShell runs script with powershell.exe -EncodedCommand in a new shell and returns its
// output and exit code. A non-zero exit code is not an error here: the caller reads Result. The
// error is a classified hypervisor error for everything else (unreachable host, credentials,
// WinRM faults, ctx ending). A script whose command line would exceed cmd.exe's limit is refused
// before anything is sent.
func (c *Client) RunPowerShell(ctx context.Context, script string) (Result, error) {
	line := EncodeCommand(script)
	if len(line) > MaxCommandLine {
		return Result{}, hypervisor.Errorf(hypervisor.ErrInvalid, "run PowerShell",
			"the script encodes to a %d-character command line and cmd.exe accepts %d (about 3,000 script characters); upload larger scripts with Upload and run them by path",
			len(line), MaxCommandLine)
	}
	var res Result
	err := c.withShell(ctx, func(sh *winrm.Shell, tr *transport) error {
		var err error
		res, err = runInShell(sh, tr, line)
		return err
	})
	return res, err
}

// withShell opens a shell, runs fn in it and deletes it, the deletion bounded by its own short
// deadline so a cancelled ctx still closes the shell (WinRM allows a user only a few).
func (c *Client) withShell(ctx context.Context, fn func(*winrm.Shell, *transport) error) error {
	select {
	case c.shells <- struct{}{}:
		defer func() { <-c.shells }()
	case <-ctx.Done():
		return classifyTransport("WinRM Create", ctx.Err())
	}
	wc, tr, err := c.newWinRM(ctx)
	if err != nil {
		return err
	}
	defer c.release(tr.http)
	sh, err := c.createShell(wc, tr)
	if err != nil {
		return err
	}
	defer func() {
		cancel := tr.detach()
		defer cancel()
		_ = sh.Close()
	}()
	return fn(sh, tr)
}

// runInShell runs one command line in sh and collects its streams.
func runInShell(sh *winrm.Shell, tr *transport, line string) (Result, error) {
	cmd, err := sh.Execute(line)
	if err != nil {
		return Result{}, err
	}
	// No Send: stdin stays open, as with masterzen/winrm's own RunPSWithString, so the run's
	// requests go one after another (the library polls Receive in a goroutine of its own).
	var stdout, stderr cappedBuffer
	var outErr, errErr error
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, outErr = io.Copy(&stdout, cmd.Stdout) }()
	go func() { defer wg.Done(); _, errErr = io.Copy(&stderr, cmd.Stderr) }()
	cmd.Wait()
	wg.Wait()
	if tr.context().Err() != nil {
		// Cut short: the terminate signal still goes out, under its own short deadline.
		cancel := tr.detach()
		defer cancel()
	}
	_ = cmd.Close() // Signal terminate; for a finished command its failure changes nothing.
	res := Result{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: cmd.ExitCode()}
	for _, err := range []error{outErr, errErr} {
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// cappedBuffer keeps the first maxOutput bytes and drops the rest, so the library's pipes are
// always drained.
type cappedBuffer struct{ bytes.Buffer }

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if room := maxOutput - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// StderrText turns PowerShell's CLIXML error stream into readable text: the Error strings of the
// <Objs> document, with the _xHHHH_ escapes decoded. Other text is returned trimmed.
func StderrText(stderr string) string {
	trimmed := strings.TrimSpace(stderr)
	rest, ok := strings.CutPrefix(trimmed, "#< CLIXML")
	if !ok {
		return trimmed
	}
	dec := xml.NewDecoder(strings.NewReader(rest))
	var out strings.Builder
	inError := false
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case xml.StartElement:
			inError = false
			if t.Name.Local == "S" {
				for _, a := range t.Attr {
					if a.Name.Local == "S" && a.Value == "Error" {
						inError = true
					}
				}
			}
		case xml.EndElement:
			inError = false
		case xml.CharData:
			if inError {
				out.WriteString(unescapeCLIXML(string(t)))
			}
		}
	}
	return strings.TrimSpace(out.String())
}

// unescapeCLIXML decodes the _xHHHH_ escapes CLIXML uses for characters XML cannot carry.
func unescapeCLIXML(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "_x")
		if i < 0 || len(s) < i+7 || s[i+6] != '_' {
			b.WriteString(s)
			return b.String()
		}
		var r rune
		valid := true
		for _, h := range s[i+2 : i+6] {
			switch {
			case h >= '0' && h <= '9':
				r = r<<4 | (h - '0')
			case h >= 'a' && h <= 'f':
				r = r<<4 | (h - 'a' + 10)
			case h >= 'A' && h <= 'F':
				r = r<<4 | (h - 'A' + 10)
			default:
				valid = false
			}
		}
		if !valid {
			b.WriteString(s[:i+2])
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		if r != '\r' {
			b.WriteRune(r)
		}
		s = s[i+7:]
	}
}
