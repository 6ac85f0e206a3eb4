package winrmclient

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/hypervisor"
	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

func TestUploadBigFile(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true})
	c := e.client(t, e.config(AuthNTLM))
	content := make([]byte, 1<<20)
	_, _ = rand.Read(content)
	const dst = `C:\ProgramData\HyperFleet\module\HyperFleet.psm1`

	start := time.Now()
	g.Expect(c.Upload(context.Background(), dst, content)).To(Succeed())
	elapsed := time.Since(start)

	got, ok := e.host.file(dst)
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(Equal(content))
	g.Expect(e.host.paths()).To(ConsistOf(strings.ToLower(dst)), "staging files removed")
	st := e.srv.Stats()
	chunks := e.host.chunks
	g.Expect(chunks).To(BeNumerically(">=", (1<<20)*4/3/3000))
	// A shell per 15 chunks, plus the finishing one.
	g.Expect(st.Calls[hvsim.ActionCreate]).To(Equal((chunks+14)/15 + 1))
	g.Expect(st.OpenShells).To(BeZero())
	t.Logf("1 MiB in %d chunks, %d shells, %d requests, %s (%.0f KiB/s)", chunks, st.Calls[hvsim.ActionCreate],
		sum(st.Calls), elapsed.Round(time.Millisecond), 1024/elapsed.Seconds())

	// Every command line stayed within cmd.exe's limit: the server would have faulted otherwise.
	g.Expect(st.Faults).To(BeEmpty())

	// Replacing the file works, and so does an empty file.
	g.Expect(c.Upload(context.Background(), dst, []byte("v2"))).To(Succeed())
	got, _ = e.host.file(dst)
	g.Expect(string(got)).To(Equal("v2"))
	g.Expect(c.Upload(context.Background(), `C:\empty.txt`, nil)).To(Succeed())
	got, ok = e.host.file(`C:\empty.txt`)
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(BeEmpty())
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func TestUploadDetectsALostChunk(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true})
	e.host.dropChunk = 3
	const dst = `C:\HyperFleet\seed.iso`
	e.host.files[strings.ToLower(dst)] = []byte("previous")
	content := make([]byte, 20000)
	_, _ = rand.Read(content)
	err := e.client(t, e.config(AuthNTLM)).Upload(context.Background(), dst, content)
	g.Expect(err).To(MatchError(hypervisor.ErrTaskFailed))
	g.Expect(err).To(MatchError(ContainSubstring("does not match")))
	got, _ := e.host.file(dst)
	g.Expect(string(got)).To(Equal("previous"), "a corrupt upload never replaces the file")
	g.Expect(e.host.paths()).To(ConsistOf(strings.ToLower(dst)))
}

// A path is data, never script: quotes of every kind PowerShell honours stay inside the literal.
func TestUploadPathCannotInjectScript(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true})
	c := e.client(t, e.config(AuthNTLM))
	for _, path := range []string{
		`C:\x'; Remove-Item -Recurse C:\ ; '.txt`,
		"C:\\x\u2019; Remove-Item -Recurse C:\\ ; \u2018.txt",
		"C:\\x\u201a\u201b'\u2018.txt",
	} {
		g.Expect(c.Upload(context.Background(), path, []byte("data"))).To(Succeed(), path)
		got, ok := e.host.file(path)
		g.Expect(ok).To(BeTrue(), path)
		g.Expect(string(got)).To(Equal("data"))
	}
	for _, run := range e.host.runs {
		g.Expect(run).NotTo(MatchRegexp(`(?m)^\s*Remove-Item -Recurse`))
	}

	for _, path := range []string{"", `relative\file`, "C:\\a\nWrite-Output pwned", `C:\a"b`, "C:\\a\x00b"} {
		err := c.Upload(context.Background(), path, []byte("x"))
		g.Expect(err).To(MatchError(hypervisor.ErrInvalid), path)
	}
}

func TestPSQuote(t *testing.T) {
	g := NewWithT(t)
	for _, s := range []string{"", "plain", "it's", "’‘‚‛'", "a''b"} {
		v, rest, ok := unquote(PSQuote(s))
		g.Expect(ok).To(BeTrue())
		g.Expect(rest).To(BeEmpty())
		g.Expect(v).To(Equal(s))
	}
}

func TestCancelledUploadLeavesNoStagingFile(t *testing.T) {
	g := NewWithT(t)
	e := newEnv(t, hvsim.Options{TLS: true})
	content := make([]byte, 50000)
	c := e.client(t, e.config(AuthNTLM))
	ctx, cancel := context.WithCancel(context.Background())
	// Cancel once the first chunks have landed.
	go func() {
		for e.host.chunkCount() < 3 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	err := c.Upload(ctx, `C:\HyperFleet\big.bin`, content)
	g.Expect(err).To(MatchError(hypervisor.ErrTransient))
	g.Eventually(e.host.paths).Should(BeEmpty(), "the staging file was removed after the cancellation")
	g.Eventually(func() int { return e.srv.Stats().OpenShells }).Should(BeZero())
}
