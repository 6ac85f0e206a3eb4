package vsphere

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Config is how to reach one vCenter and where a HypervisorCluster's VMs go in it.
type Config struct {
	// Endpoint is the vCenter's URL, https://vcenter.example.com (the SDK path /sdk is added).
	Endpoint string
	// Username and Password log in (a vCenter SSO user, "user@vsphere.local").
	Username, Password string
	// CABundle is the PEM bundle that signs the vCenter's certificate; empty uses the system roots.
	CABundle []byte
	// InsecureSkipVerify turns off TLS verification.
	InsecureSkipVerify bool
	// Datacenter is the datacenter's name or inventory path; empty is the only datacenter.
	Datacenter string
	// ComputeCluster is the compute cluster whose hosts run the VMs; empty is the only one.
	ComputeCluster string
	// ResourcePool is the resource pool of new VMs (inventory path); empty is the cluster's root pool.
	ResourcePool string
	// Folder is the VM folder of new VMs (inventory path); empty is the datacenter's VM folder.
	Folder string
	// Datastore holds full clones; empty keeps the template's datastore.
	Datastore string
	// Cluster is the HypervisorCluster's namespace/name and InstallationID its installation
	// identity: both are stamped on every VM and decide ownership.
	Cluster, InstallationID string
	// Timeout bounds each API call; 0 is 30 s.
	Timeout time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Cluster == "" || c.InstallationID == "" {
		return c, errors.New("vsphere: Cluster and InstallationID are required")
	}
	if c.Username == "" || c.Password == "" {
		return c, errors.New("vsphere: a username and a password are required")
	}
	if _, err := c.sdkURL(); err != nil {
		return c, err
	}
	if len(c.CABundle) > 0 && !x509.NewCertPool().AppendCertsFromPEM(c.CABundle) {
		return c, errors.New("vsphere: the CA bundle holds no PEM certificate")
	}
	return c, nil
}

// sdkURL is the SOAP endpoint: the endpoint's /sdk.
func (c Config) sdkURL() (*url.URL, error) {
	u, err := url.Parse(c.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("vsphere: endpoint %q is not an http(s) URL", c.Endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/sdk"
	}
	u.User = nil
	return u, nil
}

// Hash changes whenever a setting or a credential does.
func (c Config) Hash() string {
	h := sha256.New()
	for _, s := range []string{c.Endpoint, c.Username, c.Password, string(c.CABundle), fmt.Sprint(c.InsecureSkipVerify),
		c.Datacenter, c.ComputeCluster, c.ResourcePool, c.Folder, c.Datastore, c.Cluster, c.InstallationID, c.Timeout.String()} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// The ExtraConfig keys of HyperFleet's marks.
const (
	keyInstallation = "hyperfleet.installation"
	keyCluster      = "hyperfleet.cluster"
	keyClaim        = "hyperfleet.claim"
	keyClaimID      = "hyperfleet.claim-id"
	keyTags         = "hyperfleet.tags"

	keyUserData         = "guestinfo.userdata"
	keyUserDataEncoding = "guestinfo.userdata.encoding"
	keyMetaData         = "guestinfo.metadata"
	keyMetaDataEncoding = "guestinfo.metadata.encoding"
	keyVendorData       = "guestinfo.vendordata"
	keyVendorEncoding   = "guestinfo.vendordata.encoding"
)

// cleanTags keeps tags that fit a comma-separated list, without duplicates, in order.
func cleanTags(tags []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range tags {
		t = strings.TrimSpace(t)
		if t == "" || seen[t] || strings.ContainsAny(t, ",\n\r") {
			continue
		}
		seen[t] = true
		out = append(out, t)
	}
	return out
}

func splitTags(s string) []string {
	var out []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			out = append(out, t)
		}
	}
	return out
}
