package winrmclient

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

const (
	testUser     = "hyperfleet"
	testPassword = "S3cret!pass"
)

// fakeHost is the executor of these tests: a host with an in-memory file system that understands
// the few statements HyperFleet's client sends (upload chunks, the finishing script, Remove-Item)
// and a handful for tests (Write-Output, Write-Error, exit, Start-Sleep). Anything else fails as
// PowerShell would, so a script shape the client does not really send cannot pass.
type fakeHost struct {
	mu    sync.Mutex
	files map[string][]byte
	runs  []string
	// dropChunk, when set, loses the Nth upload chunk (1-based), as a broken host would.
	dropChunk int
	chunks    int
	// stopped counts commands ended early by the server (Signal or Delete).
	stopped atomic.Int32
}

func newFakeHost() *fakeHost { return &fakeHost{files: map[string][]byte{}} }

func (h *fakeHost) file(path string) ([]byte, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	b, ok := h.files[strings.ToLower(path)]
	return b, ok
}

func (h *fakeHost) chunkCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.chunks
}

func (h *fakeHost) paths() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for p := range h.files {
		out = append(out, p)
	}
	return out
}

var (
	chunkRE  = regexp.MustCompile(`^\$ErrorActionPreference='Stop';\[IO\.File\]::(WriteAllText|AppendAllText)\((.*),'([A-Za-z0-9+/=]*)'\)$`)
	finishRE = regexp.MustCompile(`(?s)^\$ErrorActionPreference='Stop'\n\$b64=(.*?);\$tmp=(.*?);\$dst=(.*)\ntry \{\n.*if \(\$sha -ne '([0-9a-f]{64})'\).*\} finally \{ Remove-Item -LiteralPath \$b64,\$tmp -Force -ErrorAction SilentlyContinue \}$`)
	removeRE = regexp.MustCompile(`^Remove-Item -LiteralPath (.*) -Force -ErrorAction SilentlyContinue$`)
)

func (h *fakeHost) Run(ctx context.Context, user, line string, _ []byte) ([]byte, []byte, int) {
	script, ok, err := hvsim.DecodePowerShell(line)
	if !ok || err != nil {
		return nil, []byte("not a PowerShell command"), 1
	}
	script, ok = strings.CutPrefix(script, "$ProgressPreference = 'SilentlyContinue';")
	if !ok {
		return nil, clixml("progress preference not silenced"), 1
	}
	h.mu.Lock()
	h.runs = append(h.runs, script)
	h.mu.Unlock()

	if m := finishRE.FindStringSubmatch(script); m != nil {
		return h.finish(m[1], m[2], m[3], m[4])
	}
	if m := chunkRE.FindStringSubmatch(script); m != nil {
		path, rest, ok := unquote(m[2])
		if !ok || rest != "" {
			return nil, clixml("bad path literal"), 1
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.chunks++
		if h.chunks == h.dropChunk {
			return nil, nil, 0
		}
		key := strings.ToLower(path)
		if m[1] == "WriteAllText" {
			h.files[key] = nil
		}
		h.files[key] = append(h.files[key], m[3]...)
		return nil, nil, 0
	}
	if m := removeRE.FindStringSubmatch(script); m != nil {
		path, rest, ok := unquote(m[1])
		if ok && rest == "" {
			h.mu.Lock()
			delete(h.files, strings.ToLower(path))
			h.mu.Unlock()
		}
		return nil, nil, 0
	}
	var stdout []byte
	for _, stmt := range strings.Split(script, ";") {
		stmt = strings.TrimSpace(stmt)
		verb, arg, _ := strings.Cut(stmt, " ")
		switch verb {
		case "Write-Output":
			if s, rest, ok := unquote(arg); ok && rest == "" {
				stdout = append(stdout, s+"\r\n"...)
				continue
			}
			var n int
			if _, err := fmt.Sscanf(arg, "('x' * %d)", &n); err == nil {
				stdout = append(stdout, strings.Repeat("x", n)+"\r\n"...)
				continue
			}
		case "Write-Error":
			if s, rest, ok := unquote(arg); ok && rest == "" {
				return stdout, clixml(s), 1
			}
		case "exit":
			code, err := strconv.Atoi(arg)
			if err == nil {
				return stdout, nil, code
			}
		case "whoami":
			stdout = append(stdout, user+"\r\n"...)
			continue
		case "Start-Sleep":
			var ms int
			if _, err := fmt.Sscanf(arg, "-Milliseconds %d", &ms); err == nil {
				select {
				case <-time.After(time.Duration(ms) * time.Millisecond):
				case <-ctx.Done():
					h.stopped.Add(1)
					return stdout, clixml("The pipeline has been stopped."), 1
				}
				continue
			}
		case "":
			continue
		}
		return stdout, clixml("The term '" + verb + "' is not recognized as the name of a cmdlet, function, script file, or operable program."), 1
	}
	return stdout, nil, 0
}

// finish emulates the upload's last script: decode, check, move, report the SHA-256.
func (h *fakeHost) finish(b64Lit, tmpLit, dstLit, want string) ([]byte, []byte, int) {
	b64Path, r1, ok1 := unquote(b64Lit)
	tmpPath, r2, ok2 := unquote(tmpLit)
	dst, r3, ok3 := unquote(dstLit)
	if !ok1 || !ok2 || !ok3 || r1+r2+r3 != "" {
		return nil, clixml("bad literal"), 1
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	defer func() { delete(h.files, strings.ToLower(b64Path)); delete(h.files, strings.ToLower(tmpPath)) }()
	data, err := base64.StdEncoding.DecodeString(string(h.files[strings.ToLower(b64Path)]))
	if err != nil {
		return nil, clixml("Exception calling \"FromBase64String\": The input is not a valid Base-64 string"), 1
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != want {
		return nil, clixml("staged file SHA-256 " + hex.EncodeToString(sum[:]) + " does not match"), 1
	}
	h.files[strings.ToLower(dst)] = data
	return []byte(strings.ToUpper(hex.EncodeToString(sum[:])) + "\r\n"), nil, 0
}

// unquote reads a PowerShell single-quoted string at the start of s, as PowerShell's tokenizer
// does (hvsim.LexPowerShell, the model the simulator reads scripts with).
func unquote(s string) (value, rest string, ok bool) {
	tokens, err := hvsim.LexPowerShell(s)
	if err != nil || len(tokens) == 0 || tokens[0].Kind != hvsim.PSSingleQuoted {
		return "", s, false
	}
	return tokens[0].Value, s[len(tokens[0].Text):], true
}

// clixml renders msg as PowerShell's redirected error stream does.
func clixml(msg string) []byte {
	esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "\n", "_x000D__x000A_").Replace(msg)
	return []byte(`#< CLIXML` + "\r\n" + `<Objs Version="1.1.0.1" xmlns="http://schemas.microsoft.com/powershell/2004/04"><S S="Error">` +
		esc + `_x000D__x000A_</S><S S="Error">At line:1 char:1_x000D__x000A_</S></Objs>`)
}

type env struct {
	srv  *hvsim.Server
	host *fakeHost
}

func newEnv(t testing.TB, opts hvsim.Options) *env {
	t.Helper()
	host := newFakeHost()
	if opts.Users == nil {
		opts.Users = map[string]string{testUser: testPassword}
	}
	if opts.Executor == nil {
		opts.Executor = host
	}
	srv, err := hvsim.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return &env{srv: srv, host: host}
}

func (e *env) config(auth string) Config {
	return Config{Endpoint: e.srv.URL(), Username: testUser, Password: testPassword, Auth: auth,
		CABundle: e.srv.CAPEM(), OperationTimeout: 5 * time.Second}
}

func (e *env) client(t testing.TB, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
