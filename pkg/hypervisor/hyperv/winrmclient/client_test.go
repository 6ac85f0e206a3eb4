package winrmclient

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

func TestRunPowerShellBasicAndNTLM(t *testing.T) {
	for _, auth := range []string{AuthBasic, AuthNTLM, ""} {
		t.Run("auth="+auth, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t, hvsim.Options{TLS: true})
			c := e.client(t, e.config(auth))
			g.Expect(c.Insecure()).To(BeFalse())
			for i := 0; i < 3; i++ {
				res, err := c.RunPowerShell(context.Background(), "whoami; Write-Output 'it''s & <fine> ✓'; exit 3")
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res).To(Equal(Result{Stdout: testUser + "\r\nit's & <fine> ✓\r\n", ExitCode: 3}))
			}
			st := e.srv.Stats()
			g.Expect(st.Calls[hvsim.ActionCreate]).To(Equal(3))
			g.Expect(st.Calls[hvsim.ActionDelete]).To(Equal(3))
			g.Expect(st.OpenShells).To(Equal(0))
		})
	}
}

func TestWrongPasswordIsUnauthorized(t *testing.T) {
	for _, auth := range []string{AuthBasic, AuthNTLM} {
		t.Run(auth, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t, hvsim.Options{TLS: true})
			cfg := e.config(auth)
			cfg.Password = "wrong"
			_, err := e.client(t, cfg).RunPowerShell(context.Background(), "whoami")
			g.Expect(err).To(MatchError(hypervisor.ErrUnauthorized))
			g.Expect(err).To(MatchError(ContainSubstring("HTTP 401")))
			g.Expect(hypervisor.IsRetryable(err)).To(BeFalse())
			g.Expect(e.srv.Stats().Calls).To(BeEmpty())
		})
	}
}

// An NTLM client facing a host (or a man in the middle) that offers only Basic must not hand
// over the password as Basic, which go-ntlmssp alone would do.
func TestNTLMDoesNotFallBackToBasic(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true, DisableNTLM: true})
	_, err := e.client(t, e.config(AuthNTLM)).RunPowerShell(context.Background(), "whoami")
	g.Expect(err).To(MatchError(hypervisor.ErrUnauthorized))
	g.Expect(err).To(MatchError(ContainSubstring("refusing to send the password as Basic")))
	g.Expect(e.srv.Stats().Calls).To(BeEmpty(), "the server accepts Basic: any call means the password went out")
}

func TestTLSVerification(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true})
	other := newEnv(t, hvsim.Options{TLS: true})

	for name, ca := range map[string][]byte{"another CA": other.srv.CAPEM(), "system roots": nil} {
		cfg := e.config(AuthBasic)
		cfg.CABundle = ca
		_, err := e.client(t, cfg).RunPowerShell(context.Background(), "whoami")
		g.Expect(err).To(MatchError(hypervisor.ErrUnauthorized), name)
		g.Expect(err).To(MatchError(ContainSubstring("TLS certificate is not trusted")), name)
	}
	g.Expect(e.srv.Stats().Calls).To(BeEmpty(), "no request got past the handshake")

	cfg := e.config(AuthBasic)
	cfg.CABundle, cfg.InsecureSkipVerify = nil, true
	c := e.client(t, cfg)
	g.Expect(c.Insecure()).To(BeTrue())
	_, err := c.RunPowerShell(context.Background(), "whoami")
	g.Expect(err).NotTo(HaveOccurred())

	cfg = e.config(AuthBasic)
	cfg.CABundle = []byte("not PEM")
	_, err = New(cfg)
	g.Expect(err).To(MatchError(hypervisor.ErrInvalid))
}

func TestPlainHTTPOnlyWhenAllowed(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{})
	cfg := e.config(AuthNTLM)
	_, err := New(cfg)
	g.Expect(err).To(MatchError(hypervisor.ErrInvalid))
	g.Expect(err).To(MatchError(ContainSubstring("requires HTTPS (port 5986) unless allowInsecureHTTP is set")))

	cfg.AllowInsecureHTTP = true
	c := e.client(t, cfg)
	g.Expect(c.Insecure()).To(BeTrue())
	res, err := c.RunPowerShell(context.Background(), "whoami")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Stdout).To(Equal(testUser + "\r\n"))
}

func TestConfigRefusals(t *testing.T) {
	for name, mutate := range map[string]func(*Config){
		"no endpoint":        func(c *Config) { c.Endpoint = "" },
		"ftp endpoint":       func(c *Config) { c.Endpoint = "ftp://host/wsman" },
		"credentials in URL": func(c *Config) { c.Endpoint = "https://u:p@host:5986/wsman" },
		"unknown auth":       func(c *Config) { c.Auth = "kerberos" },
		"no password":        func(c *Config) { c.Password = "" },
		"tiny timeout":       func(c *Config) { c.OperationTimeout = time.Millisecond },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			cfg := Config{Endpoint: "https://host:5986/wsman", Username: "u", Password: "p"}
			mutate(&cfg)
			_, err := New(cfg)
			g.Expect(err).To(MatchError(hypervisor.ErrInvalid))
		})
	}
}

func TestOperationTimeoutFaultThenPoll(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true, ReceiveTimeout: 300 * time.Millisecond})
	res, err := e.client(t, e.config(AuthNTLM)).RunPowerShell(context.Background(), "Start-Sleep -Milliseconds 1200; Write-Output 'awake'")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Stdout).To(Equal("awake\r\n"))
	g.Expect(e.srv.Stats().Faults[hvsim.FaultOperationTimeout]).To(BeNumerically(">=", 3))
}

func TestHungHostIsBoundedByOperationTimeout(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true})
	e.srv.Inject(hvsim.Fault{Action: hvsim.ActionCreate, Delay: time.Hour})
	cfg := e.config(AuthBasic)
	cfg.OperationTimeout = time.Second
	start := time.Now()
	_, err := e.client(t, cfg).RunPowerShell(context.Background(), "whoami")
	g.Expect(err).To(MatchError(hypervisor.ErrTransient))
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	g.Expect(time.Since(start)).To(BeNumerically("<", 3*time.Second))
}

func TestCancelledRunClosesItsShell(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := e.client(t, e.config(AuthNTLM)).RunPowerShell(ctx, "Start-Sleep -Milliseconds 60000")
	g.Expect(err).To(MatchError(hypervisor.ErrTransient))
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue())
	g.Expect(time.Since(start)).To(BeNumerically("<", 3*time.Second))
	g.Eventually(func() int { return e.srv.Stats().OpenShells }).Should(BeZero(), "the shell was deleted after the deadline")
	g.Expect(e.srv.Stats().Calls[hvsim.ActionSignal]).To(Equal(1), "the command was signalled to terminate")
	g.Eventually(e.host.stopped.Load).Should(Equal(int32(1)), "the host stopped the command")
}

func TestFaultsAreClassified(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault hvsim.Fault
		class error
		code  uint32
	}{
		{"unknown shell", hvsim.Fault{Action: hvsim.ActionCommand, Code: hvsim.FaultShellNotFound}, hypervisor.ErrTransient, FaultShellNotFound},
		{"quota", hvsim.Fault{Action: hvsim.ActionCreate, Code: hvsim.FaultShellQuota}, hypervisor.ErrTransient, FaultShellQuota},
		{"too many operations", hvsim.Fault{Action: hvsim.ActionCreate, Code: hvsim.FaultTooManyOperations}, hypervisor.ErrTransient, FaultTooManyOperations},
		{"access denied", hvsim.Fault{Action: hvsim.ActionCreate, Code: hvsim.FaultAccessDenied}, hypervisor.ErrForbidden, FaultAccessDenied},
		{"service unavailable", hvsim.Fault{Action: hvsim.ActionReceive, HTTPStatus: 503}, hypervisor.ErrTransient, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			e := newEnv(t, hvsim.Options{TLS: true})
			e.srv.Inject(tc.fault)
			_, err := e.client(t, e.config(AuthNTLM)).RunPowerShell(context.Background(), "whoami")
			g.Expect(err).To(MatchError(tc.class))
			code, ok := FaultCode(err)
			g.Expect(ok).To(Equal(tc.code != 0))
			g.Expect(code).To(Equal(tc.code))
			g.Eventually(func() int { return e.srv.Stats().OpenShells }).Should(BeZero())
		})
	}
}

func TestRealShellQuota(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true, MaxShellsPerUser: 1})
	c := e.client(t, e.config(AuthNTLM))
	done := make(chan error, 1)
	go func() {
		_, err := c.RunPowerShell(context.Background(), "Start-Sleep -Milliseconds 1500")
		done <- err
	}()
	g.Eventually(func() int { return e.srv.Stats().OpenShells }).Should(Equal(1))
	_, err := c.RunPowerShell(context.Background(), "whoami")
	g.Expect(err).To(MatchError(hypervisor.ErrTransient))
	g.Expect(err).To(MatchError(ContainSubstring("maximum number of 1 concurrent shells")))
	code, _ := FaultCode(err)
	g.Expect(code).To(Equal(FaultShellQuota))
	g.Eventually(done, 5*time.Second).Should(Receive(BeNil()))
	_, err = c.RunPowerShell(context.Background(), "whoami")
	g.Expect(err).NotTo(HaveOccurred())
}

func TestScriptTooLongIsRefusedBeforeSending(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true})
	c := e.client(t, e.config(AuthNTLM))
	_, err := c.RunPowerShell(context.Background(), "Write-Output '"+strings.Repeat("a", 3100)+"'")
	g.Expect(err).To(MatchError(hypervisor.ErrInvalid))
	g.Expect(err).To(MatchError(ContainSubstring("cmd.exe accepts 8191")))
	g.Expect(e.srv.Stats().Calls).To(BeEmpty())

	// The largest script that fits goes through.
	script := "Write-Output '" + strings.Repeat("a", 3000) + "'"
	g.Expect(len(EncodeCommand(script))).To(BeNumerically("<=", MaxCommandLine))
	res, err := c.RunPowerShell(context.Background(), script)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Stdout).To(HavePrefix("aaaa"))
}

func TestErrorStreamIsReadable(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true})
	res, err := e.client(t, e.config(AuthNTLM)).RunPowerShell(context.Background(), "Write-Output 'before'; Write-Error 'VM ''ci-1'' <missing> & gone'")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.ExitCode).To(Equal(1))
	g.Expect(res.Stdout).To(Equal("before\r\n"))
	g.Expect(res.Stderr).To(HavePrefix("#< CLIXML"))
	g.Expect(res.ErrorText()).To(Equal("VM 'ci-1' <missing> & gone\nAt line:1 char:1"))
	g.Expect(StderrText("  plain text\r\n")).To(Equal("plain text"))
}

func TestLargeOutput(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true})
	res, err := e.client(t, e.config(AuthNTLM)).RunPowerShell(context.Background(), "Write-Output ('x' * 1000000)")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Stdout).To(HaveLen(1000002))
	g.Expect(e.srv.Stats().Calls[hvsim.ActionReceive]).To(BeNumerically(">=", 8))
}

// NTLM authenticates a connection, so concurrent runs must never split one handshake over two
// connections (the host would answer 401).
func TestConcurrentNTLMRuns(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true})
	c := e.client(t, e.config(AuthNTLM))
	errs := make(chan error, 24)
	for i := 0; i < cap(errs); i++ {
		go func() {
			res, err := c.RunPowerShell(context.Background(), "Start-Sleep -Milliseconds 20; whoami")
			if err == nil && res.Stdout != testUser+"\r\n" {
				err = errors.New("unexpected output " + res.Stdout)
			}
			errs <- err
		}()
	}
	for i := 0; i < cap(errs); i++ {
		g.Eventually(errs, 10*time.Second).Should(Receive(BeNil()))
	}
	g.Expect(e.srv.Stats().Unauthorized).To(BeZero())
}

// A manager killed mid-run never deletes its shells. They must not hold the user's shell quota
// for the host's two-hour IdleTimeout: each shell asks for a short one, so the host reclaims them.
func TestAbandonedShellsIdleOut(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true, MaxShellsPerUser: 1})
	cfg := e.config(AuthNTLM)
	cfg.ShellIdleTimeout = 300 * time.Millisecond
	c := e.client(t, cfg)
	// The Delete never arrives, as when the process is killed after its run.
	e.srv.Inject(hvsim.Fault{Action: hvsim.ActionDelete, HTTPStatus: http.StatusServiceUnavailable, Times: 1})
	_, err := c.RunPowerShell(context.Background(), "whoami")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(e.srv.Stats().OpenShells).To(Equal(1), "the shell was left open")
	_, err = c.RunPowerShell(context.Background(), "whoami")
	code, _ := FaultCode(err)
	g.Expect(code).To(Equal(FaultShellQuota), "the abandoned shell still counts")
	g.Eventually(func() error {
		_, err := c.RunPowerShell(context.Background(), "whoami")
		return err
	}, 5*time.Second, 100*time.Millisecond).Should(Succeed(), "the host closed the idle shell")
}

// The client queues runs beyond MaxShells instead of sending them to a host that would refuse
// them for its shell quota.
func TestRunsBeyondMaxShellsWaitTheirTurn(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true, MaxShellsPerUser: 2})
	cfg := e.config(AuthNTLM)
	cfg.MaxShells = 2
	c := e.client(t, cfg)
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.RunPowerShell(context.Background(), "Start-Sleep -Milliseconds 200")
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(e.srv.Stats().Faults[hvsim.FaultShellQuota]).To(BeZero())

	// A run waiting for a shell gives up with its context.
	hold := make(chan struct{})
	for range 2 {
		go func() {
			_, _ = c.RunPowerShell(context.Background(), "Start-Sleep -Milliseconds 1500")
			hold <- struct{}{}
		}()
	}
	g.Eventually(func() int { return e.srv.Stats().OpenShells }).Should(Equal(2))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := c.RunPowerShell(ctx, "whoami")
	g.Expect(err).To(MatchError(hypervisor.ErrTransient))
	g.Expect(err).To(MatchError(context.DeadlineExceeded))
	<-hold
	<-hold
}
