package hvsim

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"strings"
)

// The scripts of the WinRM client's Upload (pkg/hypervisor/hyperv/winrmclient): base64 chunks
// written and appended to a staging file, then one script that decodes it, checks its SHA-256,
// moves it into place and prints the SHA-256 of the result; and the removal of a staging file
// after a failure.
var (
	hvChunkRe  = regexp.MustCompile(`^\$ErrorActionPreference='Stop';\[IO\.File\]::(WriteAllText|AppendAllText)\('((?:[^']|'')+)','([A-Za-z0-9+/=]*)'\)$`)
	hvFinishRe = regexp.MustCompile(`^\$ErrorActionPreference='Stop'\n` +
		`\$b64='((?:[^']|'')+)';\$tmp='((?:[^']|'')+)';\$dst='((?:[^']|'')+)'\n` +
		regexp.QuoteMeta("try {\n"+
			"$bytes=[Convert]::FromBase64String([IO.File]::ReadAllText($b64))\n"+
			"[IO.File]::WriteAllBytes($tmp,$bytes)\n"+
			"$sha=[BitConverter]::ToString([Security.Cryptography.SHA256]::Create().ComputeHash($bytes)).Replace('-','').ToLowerInvariant()\n"+
			"if ($sha -ne '") + `([0-9a-f]{64})` + regexp.QuoteMeta("') { throw \"staged file SHA-256 $sha does not match\" }\n"+
		"Move-Item -LiteralPath $tmp -Destination $dst -Force\n"+
		"(Get-FileHash -LiteralPath $dst -Algorithm SHA256).Hash.ToLowerInvariant()\n"+
		"} finally { Remove-Item -LiteralPath $b64,$tmp -Force -ErrorAction SilentlyContinue }") + `$`)
	hvRemoveRe = regexp.MustCompile(`^Remove-Item -LiteralPath '((?:[^']|'')+)' -Force -ErrorAction SilentlyContinue$`)
)

// upload answers the scripts of the WinRM client's Upload. ok is false for any other script.
func (e *HostExecutor) upload(script string, _ []byte) (stdout, stderr []byte, exitCode int, ok bool) {
	h := e.hv
	switch {
	case hvChunkRe.MatchString(script):
		m := hvChunkRe.FindStringSubmatch(script)
		path := unquote(m[2])
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls[e.host+"/upload-chunk"]++
		hh := h.hosts[e.host]
		if !isAbsWindowsPath(path) {
			return nil, psErrorRecord(fmt.Sprintf("Exception calling \"%s\" with \"2\" argument(s): \"Could not find a part of the path '%s'.\"", m[1], path),
				"NotSpecified", "DirectoryNotFoundException"), 1, true
		}
		f := hh.files[key(path)]
		if m[1] == "WriteAllText" || f == nil {
			hh.writeFile(path, nil)
			f = hh.files[key(path)]
		}
		f.data = append(f.data, m[3]...)
		f.size = int64(len(f.data))
		return nil, nil, 0, true
	case hvFinishRe.MatchString(script):
		m := hvFinishRe.FindStringSubmatch(script)
		b64, tmp, dst, want := unquote(m[1]), unquote(m[2]), unquote(m[3]), m[4]
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls[e.host+"/upload"]++
		hh := h.hosts[e.host]
		defer func() { delete(hh.files, key(b64)); delete(hh.files, key(tmp)) }()
		f := hh.files[key(b64)]
		if f == nil {
			return nil, psErrorRecord(fmt.Sprintf("Exception calling \"ReadAllText\" with \"1\" argument(s): \"Could not find file '%s'.\"", b64),
				"NotSpecified", "FileNotFoundException"), 1, true
		}
		data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(f.data)))
		if err != nil {
			return nil, psErrorRecord("Exception calling \"FromBase64String\" with \"1\" argument(s): \"The input is not a valid Base-64 string.\"",
				"NotSpecified", "FormatException"), 1, true
		}
		if sum := sha256Hex(data); sum != want {
			return nil, psErrorRecord("staged file SHA-256 "+sum+" does not match", "OperationStopped", "RuntimeException"), 1, true
		}
		if !isAbsWindowsPath(dst) {
			return nil, psErrorRecord("Move-Item : Cannot find drive.", "ObjectNotFound", "DriveNotFound"), 1, true
		}
		hh.writeFile(dst, data)
		return []byte(sha256Hex(data) + "\r\n"), nil, 0, true
	case hvRemoveRe.MatchString(script):
		path := unquote(hvRemoveRe.FindStringSubmatch(script)[1])
		h.mu.Lock()
		defer h.mu.Unlock()
		if hh := h.hosts[e.host]; strings.Contains(path, ".hyperfleet-") {
			delete(hh.files, key(path))
		}
		return nil, nil, 0, true
	}
	return nil, nil, 0, false
}
