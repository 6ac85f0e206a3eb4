package console

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Default paths of the mounted secret files.
const (
	DefaultClientSecretFile = "/run/secrets/console/client-secret"
	DefaultSessionKeyFile   = "/run/secrets/console/session-key"
)

// Settings configure the console. LoadSettings reads them from the environment; secrets come from
// files, never from the environment.
type Settings struct {
	// Listen is the address to serve on (LISTEN, default :8080).
	Listen string
	// PublicURL is the console's external URL (PUBLIC_URL), e.g. https://console.example.com; the
	// OIDC redirect URI is PublicURL + /oidc/callback.
	PublicURL string
	// IssuerURL (OIDC_ISSUER_URL) and ClientID (OIDC_CLIENT_ID) name the OIDC client.
	IssuerURL string
	ClientID  string
	// ClientSecret is read from ClientSecretFile (OIDC_CLIENT_SECRET_FILE).
	ClientSecret     string
	ClientSecretFile string
	// RoleName (OIDC_ROLE_NAME) is the role that grants access; ReadOnlyRoleName
	// (OIDC_READ_ONLY_ROLE_NAME) a role that may look but not change. RoleClaim (OIDC_ROLE_CLAIM,
	// default roles) is the claim that carries them.
	RoleName         string
	ReadOnlyRoleName string
	RoleClaim        string
	// UsernameClaim (OIDC_USERNAME_CLAIM, default email) and GroupsClaim (OIDC_GROUPS_CLAIM,
	// default groups) name who is impersonated; an email is refused when the token says it is not
	// verified (email_verified), as the API server refuses it. UsernamePrefix and GroupsPrefix
	// (OIDC_USERNAME_PREFIX, OIDC_GROUPS_PREFIX, default "oidc:", "-" for none) are put before them,
	// as the API server's own OIDC flags do, so no token can name a system user or group.
	UsernameClaim  string
	GroupsClaim    string
	UsernamePrefix string
	GroupsPrefix   string
	// SessionKey seals session and sign-in cookies; read from SessionKeyFile (SESSION_KEY_FILE),
	// at least 32 bytes.
	SessionKey     []byte
	SessionKeyFile string
	// SessionRevocations (SESSION_REVOCATIONS) is the ConfigMap, namespace/name, that lists
	// sessions signed out before they expire, shared by every replica (config/console/sessions).
	// Empty keeps no list: a copied session cookie then works until it expires, sign-out or not.
	SessionRevocations string
	// InsecureCookies drops the Secure attribute from cookies (CONSOLE_INSECURE_COOKIES=true); only
	// allowed when PublicURL is http://127.0.0.1, for a local fleet.
	InsecureCookies bool
	// InventoryRefreshInterval (INVENTORY_REFRESH_INTERVAL, default 15s) is how often hosts and
	// VM power states are read from the hypervisors.
	InventoryRefreshInterval time.Duration
	// LogLevel (LOG_LEVEL) is DEBUG, INFO, WARN or ERROR.
	LogLevel string
	// IssuerCAFile (OIDC_ISSUER_CA_FILE) is a PEM bundle of CA certificates trusted, beside the
	// system's, for the identity provider's TLS: an IdP on a private CA (Keycloak, ADFS, Dex
	// inside the company). IssuerRoots is the system pool plus that bundle; nil when unset.
	IssuerCAFile string
	IssuerRoots  *x509.CertPool
	// DataDir (DATA_DIR, default /var/lib/hyperfleet-console) is the console's writable volume.
	DataDir string
	// HistoryURL (HISTORY_URL, default sqlite://<DataDir>/history.db) is the durable store of the
	// audit log: sqlite:///path/file.db or postgres://… (docs/history.md). A URL with a password
	// is read from HistoryURLFile (HISTORY_URL_FILE) instead. A store that cannot be opened leaves
	// the console serving everything but the audit log.
	HistoryURL     string
	HistoryURLFile string
	// Namespace (POD_NAMESPACE) is the console's own namespace, where it reads the installation's
	// public keys to check signed job records; by default its ServiceAccount's namespace, else
	// DefaultNamespace.
	Namespace string
}

// DefaultNamespace is the namespace of the install, where the manager publishes its public keys.
const DefaultNamespace = "hyperfleet-system"

// serviceAccountNamespaceFile is where Kubernetes mounts the namespace of the Pod's ServiceAccount.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// DefaultDataDir is where the console keeps its files when DATA_DIR is not set: the volume its
// Deployment mounts.
const DefaultDataDir = "/var/lib/hyperfleet-console"

// LoadSettings reads Settings from getenv and the secret files it names.
func LoadSettings(getenv func(string) string) (Settings, error) {
	get := func(key, def string) string {
		if v := strings.TrimSpace(getenv(key)); v != "" {
			return v
		}
		return def
	}
	s := Settings{
		Listen:             get("LISTEN", ":8080"),
		PublicURL:          strings.TrimSuffix(get("PUBLIC_URL", ""), "/"),
		IssuerURL:          get("OIDC_ISSUER_URL", ""),
		ClientID:           get("OIDC_CLIENT_ID", ""),
		ClientSecretFile:   get("OIDC_CLIENT_SECRET_FILE", DefaultClientSecretFile),
		RoleName:           get("OIDC_ROLE_NAME", ""),
		ReadOnlyRoleName:   get("OIDC_READ_ONLY_ROLE_NAME", ""),
		RoleClaim:          get("OIDC_ROLE_CLAIM", "roles"),
		UsernameClaim:      get("OIDC_USERNAME_CLAIM", "email"),
		GroupsClaim:        get("OIDC_GROUPS_CLAIM", "groups"),
		UsernamePrefix:     get("OIDC_USERNAME_PREFIX", "oidc:"),
		GroupsPrefix:       get("OIDC_GROUPS_PREFIX", "oidc:"),
		SessionKeyFile:     get("SESSION_KEY_FILE", DefaultSessionKeyFile),
		SessionRevocations: get("SESSION_REVOCATIONS", ""),
		LogLevel:           get("LOG_LEVEL", "INFO"),
		DataDir:            strings.TrimSuffix(get("DATA_DIR", DefaultDataDir), "/"),
	}
	s.HistoryURL = get("HISTORY_URL", "sqlite://"+s.DataDir+"/history.db")
	if s.Namespace = get("POD_NAMESPACE", ""); s.Namespace == "" {
		s.Namespace = DefaultNamespace
		if b, err := os.ReadFile(serviceAccountNamespaceFile); err == nil && strings.TrimSpace(string(b)) != "" {
			s.Namespace = strings.TrimSpace(string(b))
		}
	}
	var errs []error
	if s.HistoryURLFile = get("HISTORY_URL_FILE", ""); s.HistoryURLFile != "" {
		b, err := os.ReadFile(s.HistoryURLFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("HISTORY_URL_FILE: %w", err))
		}
		s.HistoryURL = strings.TrimSpace(string(b))
	}
	// An empty value is the default, so "-" is no prefix, as the API server's --oidc-username-prefix has it.
	for _, prefix := range []*string{&s.UsernamePrefix, &s.GroupsPrefix} {
		if *prefix == "-" {
			*prefix = ""
		}
	}
	if v := get("INVENTORY_REFRESH_INTERVAL", "15s"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			errs = append(errs, fmt.Errorf("INVENTORY_REFRESH_INTERVAL %q: want a duration of at least 1s, e.g. 15s", v))
		}
		s.InventoryRefreshInterval = d
	}
	switch v := get("CONSOLE_INSECURE_COOKIES", "false"); v {
	case "true":
		s.InsecureCookies = true
	case "false":
	default:
		errs = append(errs, fmt.Errorf("CONSOLE_INSECURE_COOKIES %q: want true or false", v))
	}
	if s.IssuerCAFile = get("OIDC_ISSUER_CA_FILE", ""); s.IssuerCAFile != "" {
		if roots, err := issuerRoots(s.IssuerCAFile); err != nil {
			errs = append(errs, err)
		} else {
			s.IssuerRoots = roots
		}
	}
	secret, err := os.ReadFile(s.ClientSecretFile)
	if err != nil {
		errs = append(errs, fmt.Errorf("OIDC client secret: %w", err))
	}
	s.ClientSecret = strings.TrimSpace(string(secret))
	if s.SessionKey, err = os.ReadFile(s.SessionKeyFile); err != nil {
		errs = append(errs, fmt.Errorf("session key: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return s, err
	}
	return s, s.Validate()
}

// Validate checks that the settings are complete and consistent.
func (s Settings) Validate() error {
	var errs []error
	need := map[string]string{"OIDC_ISSUER_URL": s.IssuerURL, "OIDC_CLIENT_ID": s.ClientID,
		"OIDC_ROLE_NAME": s.RoleName, "PUBLIC_URL": s.PublicURL}
	for _, k := range []string{"OIDC_ISSUER_URL", "OIDC_CLIENT_ID", "OIDC_ROLE_NAME", "PUBLIC_URL"} {
		if need[k] == "" {
			errs = append(errs, fmt.Errorf("%s is required", k))
		}
	}
	if s.ClientSecret == "" {
		errs = append(errs, errors.New("the OIDC client secret file is empty"))
	}
	if len(s.SessionKey) < 32 {
		errs = append(errs, fmt.Errorf("the session key file holds %d bytes; it needs at least 32 random bytes", len(s.SessionKey)))
	}
	if s.ReadOnlyRoleName != "" && s.ReadOnlyRoleName == s.RoleName {
		errs = append(errs, errors.New("OIDC_READ_ONLY_ROLE_NAME must differ from OIDC_ROLE_NAME"))
	}
	if s.PublicURL != "" {
		u, err := url.Parse(s.PublicURL)
		switch {
		case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
			errs = append(errs, fmt.Errorf("PUBLIC_URL %q: want an absolute http(s) URL", s.PublicURL))
		case u.Scheme == "http" && u.Hostname() != "127.0.0.1":
			errs = append(errs, fmt.Errorf("PUBLIC_URL %q: the console is served over https:// (plain http only on 127.0.0.1 for a local fleet)", s.PublicURL))
		case s.InsecureCookies && u.Hostname() != "127.0.0.1":
			errs = append(errs, errors.New("CONSOLE_INSECURE_COOKIES is only allowed with a PUBLIC_URL on http://127.0.0.1"))
		case u.Scheme == "http" && !s.InsecureCookies:
			errs = append(errs, errors.New("PUBLIC_URL is http://: browsers drop Secure cookies there; set CONSOLE_INSECURE_COOKIES=true for a local fleet"))
		}
	}
	if _, ok := s.sessionRevocationsKey(); s.SessionRevocations != "" && !ok {
		errs = append(errs, fmt.Errorf("SESSION_REVOCATIONS %q: want the ConfigMap as namespace/name", s.SessionRevocations))
	}
	if s.InventoryRefreshInterval <= 0 {
		errs = append(errs, errors.New("INVENTORY_REFRESH_INTERVAL must be positive"))
	}
	return errors.Join(errs...)
}

// sessionRevocationsKey is the ConfigMap of SessionRevocations; false when none (or no valid one)
// is set.
func (s Settings) sessionRevocationsKey() (client.ObjectKey, bool) {
	ns, name, ok := strings.Cut(s.SessionRevocations, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return client.ObjectKey{}, false
	}
	return client.ObjectKey{Namespace: ns, Name: name}, true
}

// RedirectURL is where the identity provider sends a browser back to.
func (s Settings) RedirectURL() string { return s.PublicURL + "/oidc/callback" }

// issuerRoots is the system's CA pool plus the PEM certificates in file.
func issuerRoots(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("OIDC_ISSUER_CA_FILE: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil || roots == nil {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("OIDC_ISSUER_CA_FILE %s: no PEM certificate in it", file)
	}
	return roots, nil
}

// redactURL hides the password of a database URL, for logs.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "(unparsable URL)"
	case u.User == nil:
		return raw
	}
	return u.Redacted()
}
