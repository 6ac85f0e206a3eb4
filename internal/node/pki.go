package node

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pki is the node's certificate authority, the API server's serving and kubelet-client
// certificates, the service-account signing key, and a bearer token for each identity.
type pki struct {
	dir    string
	caKey  *ecdsa.PrivateKey
	caCert *x509.Certificate
	tokens map[string]string // user -> token
}

// identities are the users of the node's own components: name, groups.
var identities = []struct{ user, groups string }{
	{"admin", "system:masters"},
	{"system:node:" + NodeName, "system:nodes"},
	{"system:kube-controller-manager", ""},
	{"system:kube-scheduler", ""},
	{"system:kube-proxy", ""},
}

func newPKI(dir string, apiIPs []net.IP) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir, tokens: map[string]string{}}
	var err error
	if p.caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hyperfleet-node-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &p.caKey.PublicKey, p.caKey)
	if err != nil {
		return nil, err
	}
	if p.caCert, err = x509.ParseCertificate(der); err != nil {
		return nil, err
	}
	if err := writePEM(p.path("ca.crt"), "CERTIFICATE", der); err != nil {
		return nil, err
	}
	dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if err := p.issue("apiserver", "kube-apiserver", nil, dns, apiIPs, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	// The API server's client identity towards kubelets (logs, exec, port-forward).
	if err := p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil, nil, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := writeKey(p.path("sa.key"), saKey); err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.path("sa.pub"), "PUBLIC KEY", pub); err != nil {
		return nil, err
	}
	// Static bearer tokens for the node's own components: the API server's token file is the
	// shortest honest way to give each its own user (the Node authorizer and RBAC see real names).
	var lines []string
	for i, id := range identities {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return nil, err
		}
		tok := hex.EncodeToString(b)
		p.tokens[id.user] = tok
		line := fmt.Sprintf("%s,%s,uid-%d", tok, id.user, i)
		if id.groups != "" {
			line += `,"` + id.groups + `"`
		}
		lines = append(lines, line)
	}
	if err := os.WriteFile(p.path("tokens.csv"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// issue writes <name>.crt and <name>.key signed by the node's CA.
func (p *pki) issue(name, cn string, orgs, dns []string, ips []net.IP, usage x509.ExtKeyUsage) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn, Organization: orgs},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(30 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: dns, IPAddresses: ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return err
	}
	if err := writePEM(p.path(name+".crt"), "CERTIFICATE", der); err != nil {
		return err
	}
	return writeKey(p.path(name+".key"), key)
}

// kubeconfig writes a kubeconfig for user at server and returns its path.
func (p *pki) kubeconfig(user, server string) (string, error) {
	name := strings.NewReplacer(":", "-").Replace(user)
	path := p.path(name + ".kubeconfig")
	ca, err := os.ReadFile(p.path("ca.crt"))
	if err != nil {
		return "", err
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: node
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: node
  context: {cluster: node, user: %s}
current-context: node
`, server, b64(ca), user, p.tokens[user], user)
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return writePEM(path, "EC PRIVATE KEY", der)
}
