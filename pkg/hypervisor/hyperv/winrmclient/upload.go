package winrmclient

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/masterzen/winrm"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
)

// commandsPerShell is how many chunk commands share one shell, as packer-community/winrmcp does
// (MaxOperationsPerShell 15), keeping well inside MaxProcessesPerShell.
const commandsPerShell = 15

// Upload writes content to remotePath on the host. WinRM has no file transfer, so the content
// travels as base64 appended to a staging file beside remotePath, one command line (within
// cmd.exe's limit) at a time; a last script decodes it to a second staging file, checks its
// SHA-256, moves it over remotePath (a rename on the same volume, so readers never see a partial
// file) and reports the SHA-256 of remotePath, which must match content's.
func (c *Client) Upload(ctx context.Context, remotePath string, content []byte) error {
	const op = "upload file"
	if err := checkRemotePath(remotePath); err != nil {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "%v", err)
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	staging := remotePath + ".hyperfleet-" + hex.EncodeToString(nonce[:])
	b64Path, tmpPath := staging+".b64", staging+".tmp"

	encoded := base64.StdEncoding.EncodeToString(content)
	size := chunkSize(b64Path)
	if size < 64 {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "remote path is too long to leave room for data in a command line")
	}
	var chunks []string
	for i := 0; i < len(encoded); i += size {
		chunks = append(chunks, encoded[i:min(i+size, len(encoded))])
	}
	if len(chunks) == 0 {
		chunks = []string{""}
	}
	for start := 0; start < len(chunks); start += commandsPerShell {
		batch := chunks[start:min(start+commandsPerShell, len(chunks))]
		err := c.withShell(ctx, func(sh *winrm.Shell, tr *transport) error {
			for i, chunk := range batch {
				if err := runChecked(sh, tr, chunkScript(b64Path, chunk, start+i == 0)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			c.removeStaging(ctx, b64Path)
			return wrapOp(op, remotePath, err)
		}
	}

	sum := sha256.Sum256(content)
	want := hex.EncodeToString(sum[:])
	var res Result
	err := c.withShell(ctx, func(sh *winrm.Shell, tr *transport) error {
		var err error
		res, err = runInShell(sh, tr, EncodeCommand(finishScript(b64Path, tmpPath, remotePath, want)))
		return err
	})
	if err != nil {
		return wrapOp(op, remotePath, err)
	}
	if res.ExitCode != 0 {
		return hypervisor.Errorf(hypervisor.ErrTaskFailed, op, "%s: exit code %d: %s", remotePath, res.ExitCode, res.ErrorText())
	}
	if got := strings.ToLower(strings.TrimSpace(res.Stdout)); got != want {
		return hypervisor.Errorf(hypervisor.ErrTaskFailed, op, "%s: SHA-256 on the host is %q, want %s", remotePath, got, want)
	}
	return nil
}

// runChecked runs one script and turns a non-zero exit into an error.
func runChecked(sh *winrm.Shell, tr *transport, script string) error {
	res, err := runInShell(sh, tr, EncodeCommand(script))
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return hypervisor.Errorf(hypervisor.ErrTaskFailed, "run PowerShell", "exit code %d: %s", res.ExitCode, res.ErrorText())
	}
	return nil
}

// removeStaging deletes a partial staging file, even when ctx has ended, within a short deadline.
func (c *Client) removeStaging(ctx context.Context, path string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.httpDeadline())
	defer cancel()
	_, _ = c.RunPowerShell(ctx, "Remove-Item -LiteralPath "+PSQuote(path)+" -Force -ErrorAction SilentlyContinue")
}

func wrapOp(op, path string, err error) error {
	return fmt.Errorf("%s %s: %w", op, path, err)
}

func chunkScript(b64Path, chunk string, first bool) string {
	method := "AppendAllText"
	if first {
		method = "WriteAllText"
	}
	return fmt.Sprintf("$ErrorActionPreference='Stop';[IO.File]::%s(%s,%s)", method, PSQuote(b64Path), PSQuote(chunk))
}

func finishScript(b64Path, tmpPath, dst, sha string) string {
	return fmt.Sprintf(`$ErrorActionPreference='Stop'
$b64=%s;$tmp=%s;$dst=%s
try {
$bytes=[Convert]::FromBase64String([IO.File]::ReadAllText($b64))
[IO.File]::WriteAllBytes($tmp,$bytes)
$sha=[BitConverter]::ToString([Security.Cryptography.SHA256]::Create().ComputeHash($bytes)).Replace('-','').ToLowerInvariant()
if ($sha -ne %s) { throw "staged file SHA-256 $sha does not match" }
Move-Item -LiteralPath $tmp -Destination $dst -Force
(Get-FileHash -LiteralPath $dst -Algorithm SHA256).Hash.ToLowerInvariant()
} finally { Remove-Item -LiteralPath $b64,$tmp -Force -ErrorAction SilentlyContinue }`, PSQuote(b64Path), PSQuote(tmpPath), PSQuote(dst), PSQuote(sha))
}

// chunkSize is the largest base64 length (a multiple of 4) whose chunk script still encodes
// within MaxCommandLine.
func chunkSize(b64Path string) int {
	lo, hi := 0, MaxCommandLine
	for lo < hi { // largest n with the encoded line within the limit
		mid := (lo + hi + 1) / 2
		if len(EncodeCommand(chunkScript(b64Path, strings.Repeat("A", mid), false))) <= MaxCommandLine {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo / 4 * 4
}

// checkRemotePath refuses paths no Windows file can have and control characters that would end a
// script line.
func checkRemotePath(p string) error {
	if p == "" {
		return fmt.Errorf("remote path is empty")
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(`"<>|?*`, r) {
			return fmt.Errorf("remote path %q contains %q, which a Windows path cannot", p, r)
		}
	}
	if len(p) < 3 || p[1] != ':' || (p[2] != '\\' && p[2] != '/') {
		if !strings.HasPrefix(p, `\\`) {
			return fmt.Errorf("remote path %q is not absolute (C:\\... or \\\\server\\share\\...)", p)
		}
	}
	return nil
}
