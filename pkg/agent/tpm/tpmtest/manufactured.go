package tpmtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// StartManufactured starts a swtpm provisioned as a manufacturer would: swtpm_setup creates its
// EKs and certifies the RSA 2048 one with a local CA (swtpm_localca), whose certificates (root and
// issuer, PEM) it returns with the TPM's address.
func StartManufactured(t testing.TB) (addr string, caBundle []byte) {
	t.Helper()
	setup, err := exec.LookPath("swtpm_setup")
	if err != nil {
		t.Fatal(InstallHint)
	}
	localca, err := exec.LookPath("swtpm_localca")
	if err != nil {
		t.Fatal(InstallHint)
	}
	dir := t.TempDir()
	state, ca := filepath.Join(dir, "state"), filepath.Join(dir, "ca")
	for _, d := range []string{state, ca} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	caConf := filepath.Join(dir, "localca.conf")
	write(t, caConf, fmt.Sprintf("statedir = %[1]s\nsigningkey = %[1]s/signkey.pem\nissuercert = %[1]s/issuercert.pem\ncertserial = %[1]s/certserial\n", ca))
	setupConf := filepath.Join(dir, "setup.conf")
	write(t, setupConf, fmt.Sprintf("create_certs_tool = %s\ncreate_certs_tool_config = %s\ncreate_certs_tool_options = /dev/null\nactive_pcr_banks = sha256\n", localca, caConf))
	out, err := exec.Command(setup, "--tpm2", "--tpmstate", state, "--create-ek-cert", "--config", setupConf).CombinedOutput()
	if err != nil {
		t.Fatalf("swtpm_setup: %v\n%s", err, out)
	}
	var bundle []byte
	for _, f := range []string{"swtpm-localca-rootca-cert.pem", "issuercert.pem"} {
		pem, err := os.ReadFile(filepath.Join(ca, f))
		if err != nil {
			t.Fatal(err)
		}
		bundle = append(bundle, pem...)
	}
	return startWithState(t, state), bundle
}

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
