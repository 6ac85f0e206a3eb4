package hyperv

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Defaults applied by New for zero-valued Config fields: folders under C:\ProgramData\HyperFleet,
// which the least-privilege account gets write access to (docs/hyperv.md).
const (
	DefaultTimeout            = 60 * time.Second
	DefaultVMDirectory        = `C:\ProgramData\HyperFleet\VMs`
	DefaultVHDDirectory       = `C:\ProgramData\HyperFleet\Disks`
	DefaultSeedDirectory      = `C:\ProgramData\HyperFleet\Seeds`
	DefaultTemplateDirectory  = `C:\ProgramData\HyperFleet\Templates`
	DefaultModuleRoot         = `C:\ProgramData\HyperFleet\Modules`
	DefaultStorageIndex       = `C:\ProgramData\HyperFleet\Storages`
	DefaultSecureBootTemplate = "MicrosoftUEFICertificateAuthority"
	// DefaultMemoryMiB is a new VM's memory until Configure sets the claim's, when the template
	// does not say.
	DefaultMemoryMiB = 2048
)

// Host is one Hyper-V host of the cluster: a standalone host or a failover cluster's node, each
// with its own WinRM listener.
type Host struct {
	// Name is the node name HyperFleet uses (in VM references and placement).
	Name string
	// Endpoint is the WinRM URL, e.g. https://hv1.example.com:5986/wsman.
	Endpoint string
}

// Config is how to reach and identify one set of Hyper-V hosts.
type Config struct {
	Hosts []Host
	// Username and Password are the WinRM account's ("DOMAIN\user" or "user").
	Username string
	Password string
	// Auth is "basic" or "ntlm" (the default).
	Auth string
	// CABundle is a PEM bundle trusted for the listeners' certificates; empty means system roots.
	CABundle []byte
	// InsecureSkipVerify turns TLS verification off. Only for labs.
	InsecureSkipVerify bool
	// AllowInsecureHTTP accepts http:// endpoints, over which credentials and scripts travel in
	// clear text. Only for labs.
	AllowInsecureHTTP bool
	// Timeout bounds every call to a host. Default 60s.
	Timeout time.Duration
	// Cluster is the owning HypervisorCluster ("namespace/name").
	Cluster string
	// InstallationID is the HypervisorCluster's spec.installationID; with Cluster it scopes
	// ownership, so two installations sharing hosts never touch each other's VMs.
	InstallationID string
	// VMDirectory holds the VMs' configuration; VHDDirectory their differencing disks;
	// SeedDirectory their seed ISOs; TemplateDirectory template VHDX files (<name>.vhdx);
	// ModuleRoot the deployed module (<root>\HyperFleetHyperV\<version>).
	VMDirectory       string
	VHDDirectory      string
	SeedDirectory     string
	TemplateDirectory string
	ModuleRoot        string
	// StorageIndex holds HyperFleet's record of each storage it defined or adopted on the host,
	// one file per storage naming its folder.
	StorageIndex string
	// SecureBootTemplate is set on every new VM: "MicrosoftUEFICertificateAuthority" (Linux, the
	// default), "MicrosoftWindows", or "Off" to disable Secure Boot.
	SecureBootTemplate string
}

// windowsPath is an absolute local or UNC path without quotes of any kind, control characters or
// wildcards.
var windowsPath = regexp.MustCompile(`^(?:[A-Za-z]:\\|\\\\[^\\'"\x00-\x1f\x7f\x{2018}-\x{201e}]+\\)[^'"\x00-\x1f\x7f\x{2018}-\x{201e}*?<>|]*$`)

// psQuotes are the characters PowerShell reads as quotes: ' and " and their typographic forms
// ‘ ’ ‚ ‛ and “ ” „ (U+2018 to U+201E).
const psQuotes = "'\"\u2018\u2019\u201a\u201b\u201c\u201d\u201e"

// checkWindowsPath refuses a folder that is not an absolute Windows path, and says why for the
// characters PowerShell could read as the end of a string. The API refuses these too, but a
// HypervisorCluster stored before that rule still reaches the provider.
func checkWindowsPath(name, p string) error {
	for _, r := range p {
		switch {
		case strings.ContainsRune(psQuotes, r):
			return fmt.Errorf("%s %q contains %q (U+%04X), which PowerShell reads as a quote: a path may hold no quote of any kind", name, p, r, r)
		case r < 0x20 || r == 0x7f:
			return fmt.Errorf("%s %q contains the control character U+%04X", name, p, r)
		}
	}
	if !windowsPath.MatchString(p + `\`) {
		return fmt.Errorf("%s %q is not an absolute Windows path (C:\\… or \\\\server\\share\\…, without wildcards)", name, p)
	}
	return nil
}

// nodeName is what a host may be called: it names nodes in VM references and conditions.
var nodeName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,61}[A-Za-z0-9])?$`)

// withDefaults validates the config and fills in defaults.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if len(c.Hosts) == 0 {
		errs = append(errs, errors.New("no hosts"))
	}
	seen := map[string]bool{}
	for i, h := range c.Hosts {
		if !nodeName.MatchString(h.Name) {
			errs = append(errs, fmt.Errorf("host %d: name %q is not a host name", i, h.Name))
		}
		if seen[strings.ToLower(h.Name)] {
			errs = append(errs, fmt.Errorf("host %q is listed twice", h.Name))
		}
		seen[strings.ToLower(h.Name)] = true
		u, err := url.Parse(h.Endpoint)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
			errs = append(errs, fmt.Errorf("host %q: endpoint %q is not an http(s) URL", h.Name, h.Endpoint))
		case u.Scheme == "http" && !c.AllowInsecureHTTP:
			errs = append(errs, fmt.Errorf("host %q: endpoint %q is plain http: credentials and scripts would travel in clear text; use https (5986) or allow insecure HTTP explicitly", h.Name, h.Endpoint))
		}
	}
	if c.Username == "" || c.Password == "" {
		errs = append(errs, errors.New("username or password is empty"))
	}
	switch strings.ToLower(c.Auth) {
	case "":
		c.Auth = "ntlm"
	case "basic", "ntlm":
		c.Auth = strings.ToLower(c.Auth)
	default:
		errs = append(errs, fmt.Errorf("auth %q is neither basic nor ntlm", c.Auth))
	}
	if c.Cluster == "" {
		errs = append(errs, errors.New("cluster (the owning HypervisorCluster) is empty"))
	}
	if c.InstallationID == "" {
		errs = append(errs, errors.New("installation ID is empty: VMs cannot be marked as this installation's"))
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	for _, d := range []struct {
		field *string
		def   string
		name  string
	}{
		{&c.VMDirectory, DefaultVMDirectory, "VM directory"},
		{&c.VHDDirectory, DefaultVHDDirectory, "VHD directory"},
		{&c.SeedDirectory, DefaultSeedDirectory, "seed directory"},
		{&c.TemplateDirectory, DefaultTemplateDirectory, "template directory"},
		{&c.ModuleRoot, DefaultModuleRoot, "module root"},
		{&c.StorageIndex, DefaultStorageIndex, "storage index"},
	} {
		if *d.field == "" {
			*d.field = d.def
		}
		*d.field = strings.TrimRight(*d.field, `\`)
		if err := checkWindowsPath(d.name, *d.field); err != nil {
			errs = append(errs, err)
		}
	}
	switch c.SecureBootTemplate {
	case "":
		c.SecureBootTemplate = DefaultSecureBootTemplate
	case "Off", "MicrosoftWindows", "MicrosoftUEFICertificateAuthority", "OpenSourceShieldedVM":
	default:
		errs = append(errs, fmt.Errorf("secure boot template %q is not one of Off, MicrosoftWindows, MicrosoftUEFICertificateAuthority, OpenSourceShieldedVM", c.SecureBootTemplate))
	}
	return c, errors.Join(errs...)
}

// Hash fingerprints every field that affects the provider, credentials included, so a cache can
// rebuild it when a Secret or the HypervisorCluster changes. The secrets cannot be recovered from it.
func (c Config) Hash() string {
	h := sha256.New()
	_ = json.NewEncoder(h).Encode(c)
	return hex.EncodeToString(h.Sum(nil))
}
