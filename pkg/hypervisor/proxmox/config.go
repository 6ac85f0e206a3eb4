package proxmox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Defaults applied by New for zero-valued Config fields.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultISOStorage       = "local"
	DefaultCloudInitDevice  = "ide3"
	DefaultTaskPollInterval = 200 * time.Millisecond
	apiPath                 = "/api2/json"
)

// Config is how to reach and identify one Proxmox VE cluster.
type Config struct {
	// Endpoint is the API URL, e.g. https://pve:8006 or https://pve:8006/api2/json.
	Endpoint string
	// TokenID ("user@realm!id") and TokenSecret select API token authentication.
	TokenID     string
	TokenSecret string
	// Username ("user@realm") and Password select ticket authentication when no token is set.
	Username string
	Password string
	// CABundle is a PEM bundle trusted for the API's certificate; empty means the system roots.
	CABundle []byte
	// InsecureSkipVerify turns TLS verification off. Only for labs.
	InsecureSkipVerify bool
	// AllowInsecureHTTP accepts an http:// Endpoint, over which the credentials travel in clear
	// text. Only for labs; without it an http:// endpoint is refused.
	AllowInsecureHTTP bool
	// Timeout bounds every API call (and every internal wait for a task). Default 30s.
	Timeout time.Duration
	// Cluster is the owning HypervisorCluster ("namespace/name").
	Cluster string
	// InstallationID is the HypervisorCluster's spec.installationID. With Cluster it scopes
	// ownership: two HyperFleet installations sharing one Proxmox cluster never touch each
	// other's VMs, even with identically named HypervisorClusters.
	InstallationID string
	// ISOStorage receives the NoCloud cloud-init ISOs. Default "local".
	ISOStorage string
	// CloudInitDevice is the CD-ROM slot the cloud-init ISO is attached to. Default "ide3", which
	// leaves ide2 (the usual install CD-ROM and PVE cloud-init drive slot) alone.
	CloudInitDevice string
	// TaskPollInterval is the first delay when this package waits for a task itself; it doubles
	// up to 2s. Default 200ms.
	TaskPollInterval time.Duration
	// HTTPClient overrides the HTTP client; its transport is wrapped, never modified.
	HTTPClient *http.Client
}

// Hash fingerprints every field that affects the client, credentials included, so a cache can
// rebuild the provider when a Secret or the HypervisorCluster changes. The secrets cannot be
// recovered from it.
func (c Config) Hash() string {
	h := sha256.New()
	fp := struct {
		Endpoint, TokenID, TokenSecret, Username, Password   string
		CABundle                                             []byte
		InsecureSkipVerify, AllowInsecureHTTP                bool
		Timeout, TaskPollInterval                            time.Duration
		Cluster, InstallationID, ISOStorage, CloudInitDevice string
		HTTPClient                                           string
	}{c.Endpoint, c.TokenID, c.TokenSecret, c.Username, c.Password, c.CABundle, c.InsecureSkipVerify, c.AllowInsecureHTTP,
		c.Timeout, c.TaskPollInterval, c.Cluster, c.InstallationID, c.ISOStorage, c.CloudInitDevice,
		fmt.Sprintf("%p", c.HTTPClient)}
	_ = json.NewEncoder(h).Encode(fp)
	return hex.EncodeToString(h.Sum(nil))
}

// withDefaults validates the config and fills in defaults.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	ep, err := normalizeEndpoint(c.Endpoint)
	if err != nil {
		errs = append(errs, err)
	} else if strings.HasPrefix(ep, "http://") && !c.AllowInsecureHTTP {
		errs = append(errs, fmt.Errorf("endpoint %q is plain http: the credentials would travel in clear text; use https or allow insecure HTTP explicitly", c.Endpoint))
	}
	c.Endpoint = ep
	switch {
	case c.TokenID != "":
		if c.TokenSecret == "" {
			errs = append(errs, errors.New("token secret is empty"))
		}
		if !strings.Contains(c.TokenID, "!") || !strings.Contains(c.TokenID, "@") {
			errs = append(errs, fmt.Errorf("token id %q is not of the form user@realm!name", c.TokenID))
		}
	case c.Username != "":
		if c.Password == "" {
			errs = append(errs, errors.New("password is empty"))
		}
	default:
		errs = append(errs, errors.New("neither an API token nor a username is set"))
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
	if c.ISOStorage == "" {
		c.ISOStorage = DefaultISOStorage
	}
	if c.CloudInitDevice == "" {
		c.CloudInitDevice = DefaultCloudInitDevice
	}
	if c.TaskPollInterval <= 0 {
		c.TaskPollInterval = DefaultTaskPollInterval
	}
	return c, errors.Join(errs...)
}

// normalizeEndpoint accepts the host URL users write (https://pve:8006) as well as the API base.
func normalizeEndpoint(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return "", fmt.Errorf("endpoint %q is not an http(s) URL", raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	if !strings.HasSuffix(u.Path, apiPath) {
		u.Path += apiPath
	}
	u.RawQuery, u.Fragment = "", ""
	return u.String(), nil
}
