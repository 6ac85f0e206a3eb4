package hvsim

import (
	"context"
	"encoding/base64"
	"fmt"
	"path"
	"strings"
	"unicode/utf16"
)

// Executor runs one command line on the simulated host for user, with the stdin the client sent,
// and returns its output streams and exit code. ctx is cancelled when the client signals the
// command to terminate or deletes its shell, and when the server closes.
type Executor interface {
	Run(ctx context.Context, user string, commandLine string, stdin []byte) (stdout, stderr []byte, exitCode int)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, user, commandLine string, stdin []byte) ([]byte, []byte, int)

// Run calls f.
func (f ExecutorFunc) Run(ctx context.Context, user, commandLine string, stdin []byte) ([]byte, []byte, int) {
	return f(ctx, user, commandLine, stdin)
}

// refusingExecutor answers as cmd.exe does for a program that is not there.
type refusingExecutor struct{}

func (refusingExecutor) Run(_ context.Context, _, commandLine string, _ []byte) ([]byte, []byte, int) {
	return CmdNotRecognized(commandLine)
}

// ExitCmdNotRecognized is cmd.exe's exit code for a command it cannot find (9009,
// MSG_DIR_BAD_COMMAND_OR_FILE): WinRM runs every command line through cmd.exe /c.
const ExitCmdNotRecognized = 9009

// CmdNotRecognized is cmd.exe's answer to a command line whose program it cannot find: its
// message on stderr and exit code 9009.
func CmdNotRecognized(commandLine string) (stdout, stderr []byte, exitCode int) {
	line := strings.TrimSpace(commandLine)
	name := firstWord(line)
	if rest, ok := strings.CutPrefix(line, `"`); ok {
		name, _, _ = strings.Cut(rest, `"`)
	}
	return nil, fmt.Appendf(nil, "'%s' is not recognized as an internal or external command,\r\noperable program or batch file.\r\n", name), ExitCmdNotRecognized
}

// DecodePowerShell extracts the script from a `powershell.exe ... -EncodedCommand <base64>` command
// line (base64 of UTF-16LE), accepting the abbreviations powershell.exe does (-enc, -ec, -e) and
// the quotes cmd.exe strips. ok is false when commandLine does not run PowerShell with an encoded
// command; err reports an encoded command that is not valid base64, which powershell.exe refuses
// before running anything (see BadEncodedCommand). Bytes that are not UTF-16LE decode as .NET's
// Encoding.Unicode.GetString decodes them: a lone surrogate or a trailing odd byte becomes U+FFFD.
func DecodePowerShell(commandLine string) (script string, ok bool, err error) {
	fields := strings.Fields(strings.Trim(strings.TrimSpace(commandLine), `"`))
	if len(fields) < 3 {
		return "", false, nil
	}
	exe := strings.ToLower(path.Base(strings.ReplaceAll(strings.Trim(fields[0], `"`), `\`, "/")))
	if exe != "powershell" && exe != "powershell.exe" && exe != "pwsh" && exe != "pwsh.exe" {
		return "", false, nil
	}
	for i := 1; i < len(fields)-1; i++ {
		if !isEncodedCommandFlag(fields[i]) {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(fields[i+1])
		if err != nil {
			return "", true, fmt.Errorf("-EncodedCommand is not base64: %w", err)
		}
		units := make([]uint16, len(raw)/2)
		for j := range units {
			units[j] = uint16(raw[2*j]) | uint16(raw[2*j+1])<<8
		}
		script := string(utf16.Decode(units))
		if len(raw)%2 != 0 {
			script += "\uFFFD"
		}
		return script, true, nil
	}
	return "", false, nil
}

// ExitBadCommandLineParameter is Windows PowerShell 5.1's exit code when its command line does not
// parse (ConsoleHost.ExitCodeBadCommandLineParameter, 0xFFFD0000), as the DWORD WinRM reports.
const ExitBadCommandLineParameter = 0xFFFD0000

// BadEncodedCommand is powershell.exe's answer to an -EncodedCommand that is not base64: its
// message (CommandLineParameterParserStrings.BadCommandValue) as plain text on stderr, before any
// runspace exists, and exit code 0xFFFD0000. The usage text it then prints on stdout is left out.
func BadEncodedCommand() (stdout, stderr []byte, exitCode int) {
	return nil, []byte("Cannot process the command because the value specified with -EncodedCommand is not properly encoded. The value must be Base64 encoded.\r\n"),
		ExitBadCommandLineParameter
}

func firstWord(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// isEncodedCommandFlag reports whether arg names -EncodedCommand as powershell.exe parses it: any
// unambiguous prefix of at least -e, with - or /.
func isEncodedCommandFlag(arg string) bool {
	if len(arg) < 2 || (arg[0] != '-' && arg[0] != '/') {
		return false
	}
	name := strings.ToLower(arg[1:])
	return name == "ec" || strings.HasPrefix("encodedcommand", name)
}
