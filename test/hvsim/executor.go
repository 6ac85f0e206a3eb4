package hvsim

import (
	"context"
	"encoding/base64"
	"errors"
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
	name, _, _ := strings.Cut(strings.TrimSpace(commandLine), " ")
	return nil, fmt.Appendf(nil, "'%s' is not recognized as an internal or external command,\r\noperable program or batch file.\r\n", name), 1
}

// DecodePowerShell extracts the script from a `powershell.exe ... -EncodedCommand <base64>` command
// line (base64 of UTF-16LE), accepting the abbreviations powershell.exe does (-enc, -ec, -e) and
// the quotes cmd.exe strips. ok is false when commandLine does not run PowerShell with an encoded
// command; err reports an encoded command that is not valid base64 or UTF-16LE.
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
		if len(raw)%2 != 0 {
			return "", true, errors.New("-EncodedCommand is not UTF-16LE: odd number of bytes")
		}
		units := make([]uint16, len(raw)/2)
		for j := range units {
			units[j] = uint16(raw[2*j]) | uint16(raw[2*j+1])<<8
		}
		return string(utf16.Decode(units)), true, nil
	}
	return "", false, nil
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
