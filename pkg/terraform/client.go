// Package terraform is HyperFleet's Terraform provider (terraform-provider-hyperfleet): VMs,
// their power and the hosts of HyperFleet's hypervisor clusters, driven through the console's
// /api/v1 with the person's OIDC bearer token, so namespace RBAC, the read-only role, ownership
// marks and the console's validation apply exactly as in the browser.
package terraform

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// client calls the console's API.
type client struct {
	base  *url.URL
	http  *http.Client
	token func() (string, error)
}

// problem is the console's RFC 9457 problem document.
type problem struct {
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

// apiError is a refused call.
type apiError struct {
	Status  int
	Problem problem
}

func (e *apiError) Error() string {
	msg := e.Problem.Title
	if e.Problem.Detail != "" {
		msg += ": " + e.Problem.Detail
	}
	for _, f := range e.Problem.Errors {
		msg += fmt.Sprintf("; %s %s", f.Field, f.Message)
	}
	switch e.Status {
	case http.StatusUnauthorized:
		return "the console refused the token (401): sign in again or refresh the token file; " + msg
	case http.StatusForbidden:
		return "the console refused the change (403): your namespace role or the console's read-only role does not allow it; " + msg
	}
	return fmt.Sprintf("%s (%d)", msg, e.Status)
}

func isNotFound(err error) bool {
	var ae *apiError
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// settings are the provider block's, with the environment as fallback.
type settings struct {
	Endpoint, Token, TokenFile, CAFile string
	AllowInsecureHTTP                  bool
}

func newClient(s settings) (*client, error) {
	if s.Endpoint == "" {
		return nil, errors.New("endpoint is required (or HYPERFLEET_ENDPOINT): the console's URL, e.g. https://hyperfleet.example.com")
	}
	u, err := url.Parse(strings.TrimSuffix(s.Endpoint, "/"))
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("endpoint %q is not an http(s) URL", s.Endpoint)
	}
	if u.Scheme == "http" && !s.AllowInsecureHTTP {
		return nil, fmt.Errorf("endpoint %q is http://: the bearer token would travel in clear text; use https:// or, for a lab, set allow_insecure_http = true", s.Endpoint)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s holds no PEM certificate", s.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	token := func() (string, error) {
		if s.Token != "" {
			return s.Token, nil
		}
		if s.TokenFile == "" {
			return "", errors.New("no token: set token, token_file, HYPERFLEET_TOKEN or HYPERFLEET_TOKEN_FILE")
		}
		// Read at every call: the person's IdP tooling refreshes the file.
		b, err := os.ReadFile(s.TokenFile)
		if err != nil {
			return "", fmt.Errorf("token_file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	return &client{base: u, http: &http.Client{Transport: tr, Timeout: 60 * time.Second}, token: token}, nil
}

// doPatch sends a JSON merge patch.
func (c *client) doPatch(ctx context.Context, path string, body, out any) error {
	return c.call(ctx, http.MethodPatch, path, "application/merge-patch+json", body, out)
}

// do calls the API; out, when set, receives a 2xx answer's body.
func (c *client) do(ctx context.Context, method, path string, body, out any) error {
	return c.call(ctx, method, path, "application/json", body, out)
}

func (c *client) call(ctx context.Context, method, path, contentType string, body, out any) error {
	tok, err := c.token()
	if err != nil {
		return err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		ae := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(data, &ae.Problem) != nil || ae.Problem.Title == "" {
			ae.Problem.Title = strings.TrimSpace(string(data))
			if ae.Problem.Title == "" {
				ae.Problem.Title = http.StatusText(resp.StatusCode)
			}
		}
		return ae
	}
	if out != nil && len(data) > 0 {
		return json.Unmarshal(data, out)
	}
	return nil
}

// vm is the console's VM.
type vm struct {
	Namespace   string   `json:"namespace"`
	Name        string   `json:"name"`
	Cluster     string   `json:"cluster"`
	Host        string   `json:"host"`
	ID          string   `json:"id"`
	Template    string   `json:"template"`
	Phase       string   `json:"phase"`
	PowerState  string   `json:"powerState"`
	Addresses   []string `json:"addresses"`
	CPUs        int32    `json:"cpus"`
	MemoryMiB   int32    `json:"memoryMiB"`
	DiskGiB     int32    `json:"diskGiB"`
	Bridge      string   `json:"bridge"`
	VLAN        int32    `json:"vlan"`
	Reason      string   `json:"reason"`
	Message     string   `json:"message"`
	Deleting    bool     `json:"deleting"`
	Persistent  bool     `json:"persistent"`
	RunStrategy string   `json:"runStrategy"`
}

// createVM is the console's CreateVMRequest.
type createVM struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	Cluster     string `json:"cluster"`
	Host        string `json:"host,omitempty"`
	Template    string `json:"template"`
	CPUs        int32  `json:"cpus,omitempty"`
	MemoryMiB   int32  `json:"memoryMiB,omitempty"`
	DiskGiB     int32  `json:"diskGiB,omitempty"`
	Bridge      string `json:"bridge,omitempty"`
	VLAN        int32  `json:"vlan,omitempty"`
	UserData    string `json:"userData,omitempty"`
	RunStrategy string `json:"runStrategy,omitempty"`
}

func vmPath(namespace, name string) string {
	return "/api/v1/vms/" + url.PathEscape(namespace) + "/" + url.PathEscape(name)
}

// host is the console's Host.
type host struct {
	Namespace     string `json:"namespace"`
	Cluster       string `json:"cluster"`
	Provider      string `json:"provider"`
	Name          string `json:"name"`
	State         string `json:"state"`
	CPUs          int64  `json:"cpus"`
	MemoryMiB     int64  `json:"memoryMiB"`
	FreeMemoryMiB int64  `json:"freeMemoryMiB"`
}
