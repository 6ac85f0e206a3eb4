package webhook_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/webhook"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// slowAttack is a sender without any secret that keeps perSource slow requests open from each of
// its source addresses, reopening each as soon as the receiver ends it.
type slowAttack struct {
	addr    string
	sources []string
	// request is the start of the i-th connection's request: its headers, forged.
	request func(i int) string
	opened  atomic.Int64
}

// run keeps the connections open until ctx ends, and waits for them to close.
func (a *slowAttack) run(ctx context.Context, perSource int) {
	var wg sync.WaitGroup
	for _, src := range a.sources {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: time.Second}
		for i := range perSource {
			wg.Go(func() {
				for ctx.Err() == nil {
					a.hold(ctx, d, i)
				}
			})
		}
	}
	wg.Wait()
}

// hold sends one request's headers and then a byte of its body every 100 ms until the receiver
// answers or closes the connection.
func (a *slowAttack) hold(ctx context.Context, d *net.Dialer, i int) {
	conn, err := d.DialContext(ctx, "tcp", a.addr)
	if err != nil {
		sleep(ctx, 50*time.Millisecond)
		return
	}
	defer conn.Close()
	a.opened.Add(1)
	ended := make(chan struct{})
	go func() { defer close(ended); _, _ = io.Copy(io.Discard, conn) }()
	if _, err := io.WriteString(conn, a.request(i)); err != nil {
		return
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ended:
			sleep(ctx, 50*time.Millisecond) // and again, at once or nearly
			return
		case <-tick.C:
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// forgedRequest starts a request of a 200 KiB body with a made-up credential to one platform's
// route: a GitHub signature, a Buildkite signature, or a GitLab or Buildkite token.
func forgedRequest(i int) string {
	var path, credential string
	switch i % 4 {
	case 0, 1:
		path, credential = webhook.PathOf(platform.KindGitHub), "X-Hub-Signature-256: sha256="+strings.Repeat("0", 64)
	case 2:
		path, credential = webhook.PathOf(platform.KindBuildkite), "X-Buildkite-Signature: timestamp=1,signature="+strings.Repeat("0", 64)
	default:
		path, credential = webhook.PathOf(platform.KindGitLab), "X-Gitlab-Token: a guess"
	}
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: hooks\r\n%s\r\nContent-Length: %d\r\n\r\n{", path, credential, 200<<10)
}

// TestSlowSendersFromManyAddressesLockNoPlatformOut plays an attacker without any secret who
// keeps 32 slow requests open from each of 8 addresses (the per-source bound), reopening each
// as soon as it ends: GitHub and Buildkite routes with forged signatures, GitLab's with a
// guessed token. While the attack runs, a signed delivery of each platform must still be
// answered 2xx: once the receiver's 64 slots were all held by such requests until the read
// timeout, and every platform's deliveries were refused with 503.
func TestSlowSendersFromManyAddressesLockNoPlatformOut(t *testing.T) {
	g := NewWithT(t)
	glToken, bkToken := []byte("gitlab-hook-token"), []byte("buildkite-hook-token")
	h := startReceiver(t, webhook.Config{}, false)
	receiver, addr := h.serve(t, webhook.Config{Secrets: map[platform.Kind][]byte{
		platform.KindGitHub: secret, platform.KindGitLab: glToken, platform.KindBuildkite: bkToken}})

	attack := &slowAttack{addr: addr, request: forgedRequest}
	for i := range 8 {
		attack.sources = append(attack.sources, fmt.Sprintf("127.0.0.%d", i+2))
	}
	ctx, stop := context.WithCancel(context.Background())
	attacked := make(chan struct{})
	go func() { defer close(attacked); attack.run(ctx, webhook.DefaultMaxConcurrentPerSource) }()
	t.Cleanup(func() { stop(); <-attacked })
	g.Eventually(attack.opened.Load).WithTimeout(10*time.Second).Should(BeNumerically(">=", 8*webhook.DefaultMaxConcurrentPerSource),
		"every attacking connection is open")
	time.Sleep(500 * time.Millisecond) // and has had time to take a slot

	base := "http://" + addr
	ghBody := job{id: 61, action: "queued"}.payload()
	bkBody := []byte(`{"event":"ping"}`)
	tests := []struct {
		name   string
		path   string
		body   []byte
		header func() http.Header
	}{
		{name: "GitHub, signed", path: webhook.PathOf(platform.KindGitHub), body: ghBody, header: func() http.Header {
			return http.Header{"X-Github-Event": {"workflow_job"}, "X-Github-Delivery": {fakegithub.NewDeliveryID()},
				"X-Hub-Signature-256": {fakegithub.SignPayload(secret, ghBody)}}
		}},
		{name: "GitLab, with its token", path: webhook.PathOf(platform.KindGitLab), body: []byte(`{"object_kind":"pipeline"}`), header: func() http.Header {
			return http.Header{"X-Gitlab-Event": {"Pipeline Hook"}, "X-Gitlab-Token": {string(glToken)}}
		}},
		{name: "Buildkite, with its token", path: webhook.PathOf(platform.KindBuildkite), body: bkBody, header: func() http.Header {
			return http.Header{"X-Buildkite-Event": {"ping"}, "X-Buildkite-Token": {string(bkToken)}}
		}},
		{name: "Buildkite, signed", path: webhook.PathOf(platform.KindBuildkite), body: bkBody, header: func() http.Header {
			ts := fmt.Sprint(time.Now().Unix())
			mac := hmac.New(sha256.New, bkToken)
			mac.Write([]byte(ts + "."))
			mac.Write(bkBody)
			return http.Header{"X-Buildkite-Event": {"ping"},
				"X-Buildkite-Signature": {"timestamp=" + ts + ",signature=" + hex.EncodeToString(mac.Sum(nil))}}
		}},
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var last int
			g.Eventually(func(g Gomega) int {
				req, err := http.NewRequest(http.MethodPost, base+tt.path, bytes.NewReader(tt.body))
				g.Expect(err).NotTo(HaveOccurred())
				req.Header = tt.header()
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				g.Expect(err).NotTo(HaveOccurred())
				_ = resp.Body.Close()
				last = resp.StatusCode
				return last
			}).WithTimeout(3*time.Second).WithPolling(100*time.Millisecond).Should(
				And(BeNumerically(">=", 200), BeNumerically("<", 300)), func() string { return fmt.Sprintf("last answer %d", last) })
		})
	}
	g.Expect(receiver.Stats().Busy).To(BeNumerically(">", 0), "the attack did fill the receiver")
}

// TestTricklingBodyIsCut: a sender whose body trickles in is cut soon after the grace period,
// not after the read timeout (a minute here), while a large delivery sent at an ordinary pace is
// read and accepted.
func TestTricklingBodyIsCut(t *testing.T) {
	h := startReceiver(t, webhook.Config{}, false)
	_, addr := h.serve(t, webhook.Config{Timeouts: webhook.ServerTimeouts{Read: time.Minute}})

	t.Run("a byte every 100 ms", func(t *testing.T) {
		g := NewWithT(t)
		conn := holdRequest(t, addr, true, 100<<10)
		stopTrickle := make(chan struct{})
		defer close(stopTrickle)
		go func() {
			for {
				select {
				case <-stopTrickle:
					return
				case <-time.After(100 * time.Millisecond):
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}
		}()
		g.Expect(read(conn, 8*time.Second)).To(Or(BeZero(), Equal(http.StatusRequestTimeout)),
			"cut within seconds, not held for the read timeout")
	})

	t.Run("256 KiB in 4 KiB pieces", func(t *testing.T) {
		g := NewWithT(t)
		body := job{id: 62, action: "queued"}.payload()
		body = append(body, bytes.Repeat([]byte(" "), int(webhook.DefaultMaxBodyBytes)-len(body))...)
		pr, pw := io.Pipe()
		go func() {
			for rest := body; len(rest) > 0; {
				n := min(4<<10, len(rest))
				if _, err := pw.Write(rest[:n]); err != nil {
					return
				}
				rest = rest[n:]
				time.Sleep(5 * time.Millisecond)
			}
			_ = pw.Close()
		}()
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+webhook.Path, pr)
		g.Expect(err).NotTo(HaveOccurred())
		req.ContentLength = int64(len(body))
		req.Header.Set("X-GitHub-Event", "workflow_job")
		req.Header.Set("X-Hub-Signature-256", fakegithub.SignPayload(secret, body))
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
	})
}
