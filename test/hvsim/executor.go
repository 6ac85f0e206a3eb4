package hvsim

import (
	"context"
	"errors"
)

// Executor runs one command line on the simulated host for user, with the stdin the client sent,
// and returns its output streams and exit code. ctx is cancelled when the client signals the
// command to terminate or deletes its shell.
type Executor interface {
	Run(ctx context.Context, user string, commandLine string, stdin []byte) (stdout, stderr []byte, exitCode int)
}

// ExecutorFunc adapts a function to Executor.
type ExecutorFunc func(ctx context.Context, user, commandLine string, stdin []byte) ([]byte, []byte, int)

// Run calls f.
func (f ExecutorFunc) Run(ctx context.Context, user, commandLine string, stdin []byte) ([]byte, []byte, int) {
	return f(ctx, user, commandLine, stdin)
}

// DecodePowerShell extracts the script from a `powershell.exe ... -EncodedCommand <base64>` command
// line (base64 of UTF-16LE). ok is false when commandLine is not such a command.
func DecodePowerShell(commandLine string) (script string, ok bool, err error) {
	return "", false, errors.New("hvsim: not implemented yet")
}
