package hvsim

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/masterzen/winrm"
	"github.com/masterzen/winrm/soap"
	. "github.com/onsi/gomega"
)

func TestDecodePowerShell(t *testing.T) {
	g := NewWithT(t)
	script := "Get-VM | Where-Object { $_.Name -eq 'ünïcode ✓' }"
	got, ok, err := DecodePowerShell(winrm.Powershell(script))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(Equal("$ProgressPreference = 'SilentlyContinue';" + script))

	b64 := strings.TrimPrefix(winrm.Powershell("1"), "powershell.exe -EncodedCommand ")
	for _, line := range []string{
		`"powershell.exe -EncodedCommand ` + b64 + `"`,
		`powershell -NoProfile -NonInteractive -enc ` + b64,
		`C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe -ec ` + b64,
		`pwsh /e ` + b64,
	} {
		got, ok, err := DecodePowerShell(line)
		g.Expect(err).NotTo(HaveOccurred(), line)
		g.Expect(ok).To(BeTrue(), line)
		g.Expect(got).To(HaveSuffix(";1"), line)
	}
	for _, line := range []string{"cmd /c dir", "powershell.exe -Command Get-VM", "powershell.exe -ExecutionPolicy Bypass x"} {
		_, ok, _ := DecodePowerShell(line)
		g.Expect(ok).To(BeFalse(), line)
	}
	_, ok, err = DecodePowerShell("powershell.exe -EncodedCommand !!!")
	g.Expect(ok).To(BeTrue())
	g.Expect(err).To(HaveOccurred())
}

func TestMasterzenClientRunsCommands(t *testing.T) {
	for _, tc := range []struct {
		name string
		tls  bool
		ntlm bool
	}{{"basic over HTTPS", true, false}, {"NTLM over HTTPS", true, true}, {"basic over HTTP", false, false}, {"NTLM over HTTP", false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := startServer(t, Options{TLS: tc.tls, Executor: echoExecutor(nil)})
			c := mzClient(t, s, testUser, testPassword, tc.ntlm, "PT60S")

			stdout, stderr, code, err := c.RunWithString("echo hello & world", "")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(stdout).To(Equal("hello & world\r\n"))
			g.Expect(stderr).To(BeEmpty())
			g.Expect(code).To(Equal(0))

			stdout, _, code, err = c.RunPSWithString("whoami", "")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(stdout).To(Equal(testUser + "\r\n"))
			g.Expect(code).To(Equal(0))

			_, stderr, code, err = c.RunWithString("exit 42", "")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(stderr).To(Equal("exiting\r\n"))
			g.Expect(code).To(Equal(42))

			st := s.Stats()
			g.Expect(st.Calls[ActionCreate]).To(Equal(3))
			g.Expect(st.Calls[ActionDelete]).To(Equal(3))
			g.Expect(st.Calls[ActionSignal]).To(Equal(3))
			g.Expect(st.OpenShells).To(Equal(0))
		})
	}
}

func TestBadCredentialsGet401WithoutBody(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, Options{TLS: true, Executor: echoExecutor(nil)})
	for _, ntlm := range []bool{false, true} {
		c := mzClient(t, s, testUser, "wrong", ntlm, "PT60S")
		_, err := c.CreateShell()
		g.Expect(err).To(MatchError(ContainSubstring("http response error: 401 - invalid content type")))
		c = mzClient(t, s, "nobody", testPassword, ntlm, "PT60S")
		_, err = c.CreateShell()
		g.Expect(err).To(MatchError(ContainSubstring("401")))
	}
	g.Expect(s.Stats().Calls).To(BeEmpty())
	g.Expect(s.Stats().Unauthorized).To(BeNumerically(">=", 4))

	// The bare 401 offers the enabled schemes and carries no SOAP body.
	resp := post(t, s, "", soapCT, []byte("<x/>"))
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	g.Expect(resp.Header.Values("WWW-Authenticate")).To(ConsistOf("Negotiate", `Basic realm="WSMAN"`))
	g.Expect(resp.ContentLength).To(BeZero())
}

func TestOperationTimeoutFaultThenPoll(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, Options{TLS: true, Executor: echoExecutor(nil)})
	c := mzClient(t, s, testUser, testPassword, false, "PT0.3S")
	stdout, _, code, err := c.RunWithString("sleep 1s", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stdout).To(Equal("slept\r\n"))
	g.Expect(code).To(Equal(0))
	g.Expect(s.Stats().Faults[FaultOperationTimeout]).To(BeNumerically(">=", 2))
}

// masterzen/winrm at HyperFleet's pinned version reads a SOAP fault with status 500 as a normal
// answer (its status check runs in a defer after the return values are set), so the faults are
// checked on the wire with the library's own request builders.

func TestShellQuotaAndUnknownShell(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, Options{TLS: true, MaxShellsPerUser: 2, Executor: echoExecutor(nil),
		Users: map[string]string{testUser: testPassword, "mallory": "mallory-pass"}})
	sh1 := createShell(t, s, testUser, testPassword)
	createShell(t, s, testUser, testPassword)
	status, body := call(t, s, testUser, testPassword, winrm.NewOpenShellRequest(s.URL(), nil))
	g.Expect(status).To(Equal(http.StatusInternalServerError))
	g.Expect(body).To(And(ContainSubstring(`Code="2150859173"`), ContainSubstring("maximum number of 2 concurrent shells"),
		ContainSubstring("http://schemas.dmtf.org/wbem/wsman/1/wsman/fault")))

	// Another user's shells do not exist for mallory: she can neither run in one nor close it.
	createShell(t, s, "mallory", "mallory-pass")
	for _, info := range s.Shells() {
		if info.Owner == "mallory" {
			continue
		}
		status, body = call(t, s, "mallory", "mallory-pass", winrm.NewExecuteCommandRequest(s.URL(), info.ID, "whoami", nil, nil))
		g.Expect(status).To(Equal(http.StatusInternalServerError))
		g.Expect(body).To(And(ContainSubstring(`Code="2150858843"`), ContainSubstring(info.ID)))
		status, body = call(t, s, "mallory", "mallory-pass", winrm.NewDeleteShellRequest(s.URL(), info.ID, nil))
		g.Expect(status).To(Equal(http.StatusInternalServerError))
		g.Expect(body).To(ContainSubstring(`Code="2150858843"`))
	}
	g.Expect(s.Shells()).To(HaveLen(3))

	status, _ = call(t, s, testUser, testPassword, winrm.NewDeleteShellRequest(s.URL(), sh1, nil))
	g.Expect(status).To(Equal(http.StatusOK))
	status, body = call(t, s, testUser, testPassword, winrm.NewDeleteShellRequest(s.URL(), sh1, nil))
	g.Expect(status).To(Equal(http.StatusInternalServerError))
	g.Expect(body).To(ContainSubstring(`Code="2150858843"`))
	createShell(t, s, testUser, testPassword)
	g.Expect(s.Stats().Faults).To(Equal(map[uint32]int{FaultShellQuota: 1, FaultShellNotFound: 5}))
}

func TestCommandLineTooLong(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, Options{TLS: true, Executor: echoExecutor(nil)})
	sh := createShell(t, s, testUser, testPassword)
	status, body := call(t, s, testUser, testPassword,
		winrm.NewExecuteCommandRequest(s.URL(), sh, "echo "+strings.Repeat("a", MaxCommandLine), nil, nil))
	g.Expect(status).To(Equal(http.StatusInternalServerError))
	g.Expect(body).To(And(ContainSubstring(`Code="2147942606"`), ContainSubstring("The filename or extension is too long."),
		ContainSubstring("w:InternalError")))
	status, _ = call(t, s, testUser, testPassword,
		winrm.NewExecuteCommandRequest(s.URL(), sh, "echo "+strings.Repeat("a", MaxCommandLine-5), nil, nil))
	g.Expect(status).To(Equal(http.StatusOK))
}

func TestStdinBeforeFirstReceive(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, Options{TLS: true, Executor: echoExecutor(nil)})
	sh := createShell(t, s, testUser, testPassword)
	status, body := call(t, s, testUser, testPassword, winrm.NewExecuteCommandRequest(s.URL(), sh, "stdin", nil, nil))
	g.Expect(status).To(Equal(http.StatusOK))
	id, err := winrm.ParseExecuteCommandResponse(body)
	g.Expect(err).NotTo(HaveOccurred())
	for _, part := range []string{"piped ", "input"} {
		status, _ = call(t, s, testUser, testPassword, winrm.NewSendInputRequest(s.URL(), sh, id, []byte(part), part == "input", nil))
		g.Expect(status).To(Equal(http.StatusOK))
	}
	status, body = call(t, s, testUser, testPassword, winrm.NewGetOutputRequest(s.URL(), sh, id, "stdout stderr", nil))
	g.Expect(status).To(Equal(http.StatusOK))
	var stdout, stderr bytes.Buffer
	done, code, err := winrm.ParseSlurpOutputErrResponse(body, &stdout, &stderr)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(done).To(BeTrue())
	g.Expect(code).To(Equal(0))
	g.Expect(stdout.String()).To(Equal("piped input"))
}

func TestInjectedFaultsAndLatency(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, Options{TLS: true, Executor: echoExecutor(nil)})
	s.Inject(Fault{Action: ActionCreate, Code: FaultTooManyOperations, Times: 1})
	status, body := call(t, s, testUser, testPassword, winrm.NewOpenShellRequest(s.URL(), nil))
	g.Expect(status).To(Equal(http.StatusInternalServerError))
	g.Expect(body).To(ContainSubstring(`Code="2150859174"`))
	sh := createShell(t, s, testUser, testPassword)

	s.Inject(Fault{Action: ActionCommand, HTTPStatus: http.StatusServiceUnavailable, Times: 1})
	status, _ = call(t, s, testUser, testPassword, winrm.NewExecuteCommandRequest(s.URL(), sh, "echo x", nil, nil))
	g.Expect(status).To(Equal(http.StatusServiceUnavailable))

	s.Inject(Fault{Delay: 300 * time.Millisecond, Times: 1})
	c := mzClient(t, s, testUser, testPassword, false, "PT60S")
	start := time.Now()
	stdout, _, _, err := c.RunWithString("echo x", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(stdout).To(Equal("x\r\n"))
	g.Expect(time.Since(start)).To(BeNumerically(">=", 300*time.Millisecond))
	st := s.Stats()
	g.Expect(st.Faults).To(Equal(map[uint32]int{FaultTooManyOperations: 1}))
	g.Expect(st.HTTPErrors).To(Equal(1))
}

func TestLargeOutputSpansReceives(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, Options{TLS: true, Executor: echoExecutor(nil)})
	c := mzClient(t, s, testUser, testPassword, false, "PT60S")
	stdout, _, code, err := c.RunWithString("big 400000", "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(0))
	g.Expect(stdout).To(HaveLen(400000))
	g.Expect(s.Stats().Calls[ActionReceive]).To(BeNumerically(">=", 4))
}

func TestSignalTerminatesCommand(t *testing.T) {
	g := NewWithT(t)
	started := make(chan string, 1)
	s := startServer(t, Options{TLS: true, Executor: echoExecutor(started)})
	c := mzClient(t, s, testUser, testPassword, false, "PT0.2S")
	sh, err := c.CreateShell()
	g.Expect(err).NotTo(HaveOccurred())
	cmd, err := sh.Execute("sleep 1h")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(started).Should(Receive(Equal("sleep 1h")))
	g.Expect(cmd.Close()).To(Succeed())
	g.Expect(sh.Close()).To(Succeed())
	done := make(chan struct{})
	go func() { _ = s.Close(); close(done) }()
	g.Eventually(done, 5*time.Second).Should(BeClosed(), "the executor saw its context end")
}

const soapCT = "application/soap+xml;charset=UTF-8"

// call posts one of masterzen/winrm's requests with Basic credentials.
func call(t testing.TB, s *Server, user, password string, msg *soap.SoapMessage) (int, string) {
	t.Helper()
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	resp := post(t, s, auth, soapCT, []byte(msg.String()))
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func createShell(t testing.TB, s *Server, user, password string) string {
	t.Helper()
	status, body := call(t, s, user, password, winrm.NewOpenShellRequest(s.URL(), nil))
	id, err := winrm.ParseOpenShellResponse(body)
	if status != http.StatusOK || err != nil || id == "" {
		t.Fatalf("create shell: %d %v %s", status, err, body)
	}
	return id
}

func post(t testing.TB, s *Server, auth, contentType string, body []byte) *http.Response {
	t.Helper()
	return do(t, s, http.MethodPost, "/wsman", auth, contentType, body)
}

func do(t testing.TB, s *Server, method, path, auth, contentType string, body []byte) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, strings.TrimSuffix(s.URL(), "/wsman")+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := trusting(t, s).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func trusting(t testing.TB, s *Server) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(s.CAPEM())
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

func TestIdleShellsAreClosed(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, Options{TLS: true, MaxShellsPerUser: 1, ShellIdleTimeout: 100 * time.Millisecond, Executor: echoExecutor(nil)})
	sh := createShell(t, s, testUser, testPassword)
	time.Sleep(150 * time.Millisecond)
	status, body := call(t, s, testUser, testPassword, winrm.NewExecuteCommandRequest(s.URL(), sh, "echo late", nil, nil))
	g.Expect(status).To(Equal(http.StatusInternalServerError))
	g.Expect(body).To(ContainSubstring(`Code="2150858843"`))
	createShell(t, s, testUser, testPassword) // the quota was freed
}

// openShellRequest is masterzen/winrm's Create with an IdleTimeOut, as HyperFleet's client sends it.
func openShellRequest(url, idle string) *soap.SoapMessage {
	msg := soap.NewMessage()
	msg.Header().To(url).ReplyTo(anonymous).MaxEnvelopeSize(153600).Id("uuid:" + newID()).Locale("en-US").Timeout("PT60S").
		Action(actionCreate).ResourceURI(cmdResource).Build()
	body := msg.CreateBodyElement("Shell", soap.DOM_NS_WIN_SHELL)
	msg.CreateElement(body, "IdleTimeOut", soap.DOM_NS_WIN_SHELL).SetContent(idle)
	msg.CreateElement(body, "InputStreams", soap.DOM_NS_WIN_SHELL).SetContent("stdin")
	msg.CreateElement(body, "OutputStreams", soap.DOM_NS_WIN_SHELL).SetContent("stdout stderr")
	return msg
}

func TestShellIdleTimeOutFromTheClient(t *testing.T) {
	g := NewWithT(t)
	s := startServer(t, Options{TLS: true, MaxShellsPerUser: 1, ShellIdleTimeout: time.Hour, Executor: echoExecutor(nil)})

	// A client asking for less than the server's IdleTimeout gets it, and its shell is reclaimed.
	status, body := call(t, s, testUser, testPassword, openShellRequest(s.URL(), "PT0.200S"))
	g.Expect(status).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring("<rsp:IdleTimeOut>PT0.200S</rsp:IdleTimeOut>"))
	status, _ = call(t, s, testUser, testPassword, winrm.NewOpenShellRequest(s.URL(), nil))
	g.Expect(status).To(Equal(http.StatusInternalServerError), "the quota of one shell is taken")
	time.Sleep(250 * time.Millisecond)

	// Asking for more than the server allows gets the server's.
	status, body = call(t, s, testUser, testPassword, openShellRequest(s.URL(), "PT7200S"))
	g.Expect(status).To(Equal(http.StatusOK), body)
	g.Expect(body).To(ContainSubstring("<rsp:IdleTimeOut>PT3600.000S</rsp:IdleTimeOut>"))
	id, err := winrm.ParseOpenShellResponse(body)
	g.Expect(err).NotTo(HaveOccurred())
	call(t, s, testUser, testPassword, winrm.NewDeleteShellRequest(s.URL(), id, nil))

	// Milliseconds as a bare number are not an xs:duration.
	status, body = call(t, s, testUser, testPassword, openShellRequest(s.URL(), "3600000"))
	g.Expect(status).To(Equal(http.StatusInternalServerError))
	g.Expect(body).To(ContainSubstring("w:SchemaValidationError"))
	g.Expect(body).To(ContainSubstring(`Code="2150858817"`))
	g.Expect(s.Stats().OpenShells).To(BeZero())
}
