package hyperv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor/hyperv/module"
)

// Shell runs PowerShell on one host and writes files there: the WinRM client in production.
type Shell interface {
	RunPowerShell(ctx context.Context, script string) (Result, error)
	Upload(ctx context.Context, remotePath string, content []byte) error
}

// host is one Hyper-V host and what HyperFleet knows about its module.
type host struct {
	name  string
	shell Shell
	p     *Provider

	mu sync.Mutex
	// deployed is true once this process saw the expected module on the host; a call that finds
	// it missing clears it.
	deployed bool
}

// errModuleMissing: the module could not be imported (never deployed, removed, another version).
var errModuleMissing = errors.New("HyperFleet's PowerShell module is not installed")

// call runs one module function with in as its argument and decodes its data into out (nil to
// drop it). The module is deployed first if this process has not seen it on the host, and again
// if the call finds it gone.
func (h *host) call(ctx context.Context, op, function string, in, out any) error {
	if err := h.ensureModule(ctx, op); err != nil {
		return err
	}
	err := h.callOnce(ctx, op, function, in, out)
	if errors.Is(err, errModuleMissing) {
		h.mu.Lock()
		h.deployed = false
		h.mu.Unlock()
		if err := h.ensureModule(ctx, op); err != nil {
			return err
		}
		err = h.callOnce(ctx, op, function, in, out)
	}
	return err
}

func (h *host) callOnce(ctx context.Context, op, function string, in, out any) error {
	script, err := callScript(h.p.cfg.ModuleRoot, function, in)
	if err != nil {
		return hypervisor.Errorf(hypervisor.ErrInvalid, op, "%v", err)
	}
	stdout, err := h.run(ctx, op, script)
	if err != nil {
		return err
	}
	env, err := decodeEnvelope(stdout)
	if err != nil {
		return hypervisor.Errorf(hypervisor.ErrTransient, op, "host %s, %s: %v", h.name, function, err)
	}
	if !env.Ok {
		return hypervisor.Errorf(classOf(env.Class), op, "host %s: %s", h.name, env.Message)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(env.Data, out); err != nil {
		return hypervisor.Errorf(hypervisor.ErrTransient, op, "host %s, %s: decode answer: %v", h.name, function, err)
	}
	return nil
}

// run runs a script and returns its output; a non-zero exit is an error carrying the error stream.
func (h *host) run(ctx context.Context, op, script string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, h.p.cfg.Timeout)
	defer cancel()
	res, err := h.shell.RunPowerShell(ctx, script)
	if err != nil {
		if !errors.Is(err, hypervisor.ErrUnauthorized) && !errors.Is(err, hypervisor.ErrForbidden) &&
			!errors.Is(err, hypervisor.ErrInvalid) && !errors.Is(err, hypervisor.ErrTransient) {
			err = &hypervisor.Error{Class: hypervisor.ErrTransient, Op: "winrm", Err: err}
		}
		return "", fmt.Errorf("%s: host %s: %w", op, h.name, err)
	}
	if res.ExitCode != 0 {
		msg := errorText(res.Stderr)
		if isModuleMissing(msg) {
			return "", &hypervisor.Error{Class: hypervisor.ErrTransient, Op: op, Err: fmt.Errorf("host %s: %w: %s", h.name, errModuleMissing, msg)}
		}
		return "", hypervisor.Errorf(hypervisor.ErrTransient, op, "host %s: PowerShell exited with %d: %s", h.name, res.ExitCode, msg)
	}
	return res.Stdout, nil
}

// isModuleMissing recognises Import-Module's failure to find the module (any version).
func isModuleMissing(msg string) bool {
	return strings.Contains(msg, "Modules_ModuleNotFound") || strings.Contains(msg, "Modules_ModuleWithVersionNotFound") ||
		strings.Contains(msg, "was not loaded because no valid module file was found")
}

// ensureModule deploys this version of the module unless this process already saw it on the
// host: probe the version folder, and on a different version or content upload both files
// (the manifest last) and probe again.
func (h *host) ensureModule(ctx context.Context, op string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.deployed {
		return nil
	}
	probe, err := h.probe(ctx, op)
	if err != nil {
		return err
	}
	if probe.Version != module.Version || probe.Sha256 != module.ScriptSHA256() {
		if err := h.deploy(ctx, op); err != nil {
			return err
		}
		if probe, err = h.probe(ctx, op); err != nil {
			return err
		}
		if probe.Version != module.Version || probe.Sha256 != module.ScriptSHA256() {
			return hypervisor.Errorf(hypervisor.ErrTransient, op, "host %s: module %s %s was uploaded but the host reports version %q, SHA-256 %q",
				h.name, module.Name, module.Version, probe.Version, probe.Sha256)
		}
	}
	h.deployed = true
	return nil
}

func (h *host) probe(ctx context.Context, op string) (moduleProbe, error) {
	var probe moduleProbe
	out, err := h.run(ctx, op, probeScript(h.p.cfg.ModuleRoot))
	if err != nil {
		return probe, err
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &probe); err != nil {
		return probe, hypervisor.Errorf(hypervisor.ErrTransient, op, "host %s: module probe answered %.200q: %v", h.name, out, err)
	}
	return probe, nil
}

func (h *host) deploy(ctx context.Context, op string) error {
	dir := moduleDir(h.p.cfg.ModuleRoot)
	if _, err := h.run(ctx, op, prepareScript(dir, h.p.cfg.SeedDirectory)); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{module.Name + ".psm1", module.Script()}, {module.Name + ".psd1", module.Manifest()}} {
		if err := h.upload(ctx, op, dir+`\`+f.name, f.data); err != nil {
			return err
		}
	}
	return nil
}

func (h *host) upload(ctx context.Context, op, path string, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, h.p.cfg.Timeout)
	defer cancel()
	if err := h.shell.Upload(ctx, path, data); err != nil {
		if !errors.Is(err, hypervisor.ErrUnauthorized) && !errors.Is(err, hypervisor.ErrForbidden) &&
			!errors.Is(err, hypervisor.ErrInvalid) && !errors.Is(err, hypervisor.ErrTransient) {
			err = &hypervisor.Error{Class: hypervisor.ErrTransient, Op: "winrm upload", Err: err}
		}
		return fmt.Errorf("%s: host %s: upload %s: %w", op, h.name, path, err)
	}
	return nil
}

// classOf maps the module's error classes to hypervisor error classes. "Failed" (a cmdlet failed
// for a reason the module does not know) is retried with backoff.
func classOf(class string) error {
	switch class {
	case "NotFound":
		return hypervisor.ErrNotFound
	case "NotOwned":
		return hypervisor.ErrNotOwned
	case "Busy":
		return hypervisor.ErrBusy
	case "AlreadyExists":
		return hypervisor.ErrAlreadyExists
	case "Invalid":
		return hypervisor.ErrInvalid
	case "Forbidden":
		return hypervisor.ErrForbidden
	case "Ambiguous":
		return hypervisor.ErrAmbiguous
	case "Unsupported":
		return hypervisor.ErrUnsupported
	default:
		return hypervisor.ErrTransient
	}
}
