package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/provenance"
)

type fixture struct {
	dir       string
	keyID     string
	publicPEM string
	envelope  provenance.Envelope
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	g := NewWithT(t)
	key, err := provenance.GenerateKey()
	g.Expect(err).NotTo(HaveOccurred())
	signer, err := provenance.NewSigner(key)
	g.Expect(err).NotTo(HaveOccurred())
	st, err := provenance.NewStatement("buildkite", "0190-abc", map[string]string{"vm": "runner-x", "outcome": "succeeded"})
	g.Expect(err).NotTo(HaveOccurred())
	env, err := signer.Sign(st)
	g.Expect(err).NotTo(HaveOccurred())
	f := fixture{dir: t.TempDir(), keyID: signer.KeyID(), envelope: env}
	pub, err := provenance.MarshalPublicKeyPEM(key.Public())
	g.Expect(err).NotTo(HaveOccurred())
	f.publicPEM = f.write(t, "public.pem", pub)
	return f
}

func (f fixture) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(f.dir, name)
	NewWithT(t).Expect(os.WriteFile(path, data, 0o600)).To(Succeed())
	return path
}

func (f fixture) writeJSON(t *testing.T, name string, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return f.write(t, name, data)
}

func runVerify(stdin string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestVerifiesEveryShapeOfInput(t *testing.T) {
	f := newFixture(t)
	envJSON, err := json.Marshal(f.envelope)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	for _, tc := range []struct {
		name  string
		input any
	}{
		{"bare envelope", f.envelope},
		{"export with an envelope object", map[string]any{"jobID": "0190-abc", "outcome": "succeeded", "envelope": f.envelope}},
		{"export with base64 of the envelope", map[string]any{"jobID": "0190-abc", "envelope": base64.StdEncoding.EncodeToString(envJSON)}},
		{"export with the envelope as JSON text", map[string]any{"envelope": string(envJSON)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			path := f.writeJSON(t, "record.json", tc.input)
			code, stdout, stderr := runVerify("", "--key", f.publicPEM, path)
			g.Expect(code).To(Equal(exitVerified), stderr)
			g.Expect(stdout).To(HavePrefix("verified: buildkite/0190-abc (key " + f.keyID + ")\n"))
			g.Expect(stdout).To(ContainSubstring("\n  \"outcome\": \"succeeded\""))
		})
	}
}

func TestQuietStdinAndFlagsAfterTheRecord(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	envJSON, err := json.Marshal(f.envelope)
	g.Expect(err).NotTo(HaveOccurred())
	code, stdout, stderr := runVerify(string(envJSON), "-", "--quiet", "--key", f.publicPEM)
	g.Expect(code).To(Equal(exitVerified), stderr)
	g.Expect(stdout).To(Equal("verified: buildkite/0190-abc (key " + f.keyID + ")\n"))
}

func TestRefusesTamperedAndForeignRecords(t *testing.T) {
	f := newFixture(t)
	payload, err := base64.StdEncoding.DecodeString(f.envelope.Payload)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())

	tampered := f.envelope
	tampered.Payload = base64.StdEncoding.EncodeToString(bytes.Replace(payload, []byte("succeeded"), []byte("succeedeD"), 1))
	other := newFixture(t)
	wrongType := f.envelope
	wrongType.PayloadType = "application/json"

	for _, tc := range []struct {
		name  string
		input any
		want  string
	}{
		{"tampered payload", tampered, "bad signature"},
		{"tampered inside an export", map[string]any{"envelope": tampered}, "bad signature"},
		{"signed by another installation", other.envelope, "unknown signing key"},
		{"wrong payload type", wrongType, "wrong payload type"},
		{"no envelope", map[string]any{"jobID": "0190-abc"}, "neither a DSSE envelope"},
		{"envelope field not an envelope", map[string]any{"envelope": "bm90IGFuIGVudmVsb3Bl"}, "not a DSSE envelope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			path := f.writeJSON(t, "record.json", tc.input)
			code, stdout, stderr := runVerify("", "--key", f.publicPEM, path)
			g.Expect(code).To(Equal(exitNotVerified))
			g.Expect(stdout).To(BeEmpty())
			g.Expect(stderr).To(HavePrefix("hyperfleet-verify: not verified: "))
			g.Expect(stderr).To(ContainSubstring(tc.want))
		})
	}

	g := NewWithT(t)
	code, _, stderr := runVerify("", "--key", f.publicPEM, filepath.Join(f.dir, "missing.json"))
	g.Expect(code).To(Equal(exitNotVerified))
	g.Expect(stderr).To(ContainSubstring("no such file"))
	code, _, _ = runVerify("not json", "--key", f.publicPEM, "-")
	g.Expect(code).To(Equal(exitNotVerified))
}

// TestRotatedKeys: a record signed with a previous key verifies once that key is given, in its own
// file or beside the current key in one file.
func TestRotatedKeys(t *testing.T) {
	g := NewWithT(t)
	previous, current := newFixture(t), newFixture(t)
	record := current.writeJSON(t, "old-record.json", map[string]any{"envelope": previous.envelope})

	code, _, stderr := runVerify("", "--key", current.publicPEM, record)
	g.Expect(code).To(Equal(exitNotVerified))
	g.Expect(stderr).To(ContainSubstring("unknown signing key"))

	code, stdout, stderr := runVerify("", "--key", current.publicPEM, "--key", previous.publicPEM, record)
	g.Expect(code).To(Equal(exitVerified), stderr)
	g.Expect(stdout).To(ContainSubstring("(key " + previous.keyID + ")"))

	currentPEM, err := os.ReadFile(current.publicPEM)
	g.Expect(err).NotTo(HaveOccurred())
	previousPEM, err := os.ReadFile(previous.publicPEM)
	g.Expect(err).NotTo(HaveOccurred())
	both := current.write(t, "all.pem", append(currentPEM, previousPEM...))
	code, _, stderr = runVerify("", "--key", both, record)
	g.Expect(code).To(Equal(exitVerified), stderr)
}

func TestBadUsage(t *testing.T) {
	f := newFixture(t)
	record := f.writeJSON(t, "record.json", f.envelope)
	key, err := provenance.GenerateKey()
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	privatePEM, err := provenance.MarshalPrivateKeyPEM(key)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	private := f.write(t, "private.pem", privatePEM)

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no key", []string{record}, "need at least one --key"},
		{"no record", []string{"--key", f.publicPEM}, "exactly one record"},
		{"two records", []string{"--key", f.publicPEM, record, record}, "exactly one record"},
		{"unknown flag", []string{"--key", f.publicPEM, "--url", "https://example.com", record}, "flag provided but not defined"},
		{"missing key file", []string{"--key", filepath.Join(f.dir, "nope.pem"), record}, "no such file"},
		{"key file holds no key", []string{"--key", record, record}, "no \"PUBLIC KEY\" PEM block"},
		{"private key given", []string{"--key", private, record}, "found a private key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			code, stdout, stderr := runVerify("", tc.args...)
			g.Expect(code).To(Equal(exitUsage))
			g.Expect(stdout).To(BeEmpty())
			g.Expect(stderr).To(ContainSubstring(tc.want))
		})
	}
}
