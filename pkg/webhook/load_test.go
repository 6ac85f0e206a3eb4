package webhook_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/webhook"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// serve runs a receiver with cfg on its own listener on 127.0.0.1, with the listener's timeouts,
// and returns its address.
func (h *harness) serve(t *testing.T, cfg webhook.Config) (*webhook.Receiver, string) {
	t.Helper()
	receiver := webhook.NewReceiver(env.Client, h.store, h.config(cfg), nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = receiver.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); <-done })
	return receiver, l.Addr().String()
}

// holdRequest opens a connection to addr and sends the start of a request: its headers (complete
// or not) and part of a body of contentLength bytes, then nothing more, as a slow sender would.
func holdRequest(t *testing.T, addr string, completeHeaders bool, contentLength int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = conn.Close() })
	req := "POST " + webhook.Path + " HTTP/1.1\r\nHost: hooks\r\nX-GitHub-Event: workflow_job\r\n" +
		"X-Hub-Signature-256: sha256=" + strings.Repeat("0", 64) + "\r\n"
	if completeHeaders {
		req += fmt.Sprintf("Content-Length: %d\r\n\r\n%s", contentLength, strings.Repeat(" ", 1024))
	}
	_, err = io.WriteString(conn, req)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return conn
}

// stillHeld is what read reports for a connection still waiting for its answer.
const stillHeld = -1

// read returns the status of the response on conn; 0 if the server closed the connection without
// one; stillHeld if nothing happened within wait.
func read(conn net.Conn, wait time.Duration) int {
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return stillHeld
	case err != nil:
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// TestSlowSendersAreCutAndDoNotBlockDeliveries: connections that dribble their headers (slow
// loris) or their body hold no slot for long: a genuine delivery is accepted while they hang, and
// the listener's timeouts close them.
func TestSlowSendersAreCutAndDoNotBlockDeliveries(t *testing.T) {
	g := NewWithT(t)
	h := startReceiver(t, webhook.Config{}, false)
	pool := h.createPool(t, "linux", linuxPool)
	_, addr := h.serve(t, webhook.Config{Timeouts: webhook.ServerTimeouts{ReadHeader: time.Second, Read: 2 * time.Second}})

	var slow []net.Conn
	for i := range 40 {
		slow = append(slow, holdRequest(t, addr, i%4 == 0, 100<<10))
	}
	client := &http.Client{Timeout: 5 * time.Second}
	status, err := fakegithub.PostWebhook(context.Background(), client, "http://"+addr+webhook.Path, secret, "workflow_job",
		fakegithub.NewDeliveryID(), job{id: 11, action: "queued"}.payload())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusAccepted), "a genuine delivery passes the slow senders")
	g.Eventually(func() int { return h.snapshot(g, pool).Queued }).WithTimeout(10 * time.Second).Should(Equal(1))

	for _, conn := range slow {
		// Cut by the read-header or read timeout: closed, or answered and closed, well before 10 s.
		g.Expect(read(conn, 10*time.Second)).To(Or(BeZero(), Equal(http.StatusBadRequest), Equal(http.StatusRequestTimeout)))
	}
}

// TestConcurrentUnauthenticatedBodiesAreBounded: many senders post large bodies with forged
// signatures at once and never finish them. Only MaxConcurrent are read at a time (memory stays
// bounded by MaxConcurrent × MaxBodyBytes); the others are refused at once with 503, before their
// bodies are read. All come from one address, so none may take another's slot, and the bodies'
// pace is not enforced here (BodyGrace), to see the bound alone.
func TestConcurrentUnauthenticatedBodiesAreBounded(t *testing.T) {
	g := NewWithT(t)
	h := startReceiver(t, webhook.Config{}, false)
	receiver, addr := h.serve(t, webhook.Config{MaxConcurrent: 8, MaxConcurrentPerSource: -1,
		Timeouts: webhook.ServerTimeouts{Read: time.Minute, BodyGrace: time.Minute}})

	var conns []net.Conn
	for range 40 {
		conns = append(conns, holdRequest(t, addr, true, 200<<10))
	}
	outcomes := make([]int, len(conns))
	var wg sync.WaitGroup
	for i, conn := range conns {
		wg.Go(func() { outcomes[i] = read(conn, 3*time.Second) })
	}
	wg.Wait()
	busy, held := 0, 0
	for _, o := range outcomes {
		switch o {
		case http.StatusServiceUnavailable:
			busy++
		case stillHeld:
			held++
		}
	}
	g.Expect(held).To(Equal(8), "8 bodies are being read")
	g.Expect(busy).To(Equal(32), "40 senders, 8 slots")
	g.Expect(receiver.Stats().Busy).To(Equal(uint64(32)))
}

// TestOneSourceIsThrottled: one address may hold only MaxConcurrentPerSource requests at once;
// beyond that it is told 429 with Retry-After, and once its requests end it is served again.
func TestOneSourceIsThrottled(t *testing.T) {
	g := NewWithT(t)
	h := startReceiver(t, webhook.Config{}, false)
	pool := h.createPool(t, "linux", linuxPool)
	receiver, addr := h.serve(t, webhook.Config{MaxConcurrentPerSource: 4, Timeouts: webhook.ServerTimeouts{Read: time.Minute, BodyGrace: time.Minute}})
	url := "http://" + addr + webhook.Path

	var held []net.Conn
	for range 4 {
		held = append(held, holdRequest(t, addr, true, 200<<10))
	}
	body := job{id: 12, action: "queued"}.payload()
	g.Eventually(func(g Gomega) {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("X-GitHub-Event", "workflow_job")
		req.Header.Set("X-Hub-Signature-256", fakegithub.SignPayload(secret, body))
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusTooManyRequests))
		g.Expect(resp.Header.Get("Retry-After")).NotTo(BeEmpty())
	}).WithTimeout(15*time.Second).Should(Succeed(), func() string {
		// If the held requests were answered, their answers and the counters say why.
		answers := make([]int, len(held))
		for i, c := range held {
			answers[i] = read(c, 100*time.Millisecond)
		}
		return fmt.Sprintf("held requests' answers %v (%d = still held); receiver %+v", answers, stillHeld, receiver.Stats())
	})
	g.Expect(receiver.Stats().Throttled).To(BeNumerically(">=", 1))

	for _, c := range held {
		_ = c.Close()
	}
	g.Eventually(func() int {
		status, err := fakegithub.PostWebhook(context.Background(), http.DefaultClient, url, secret, "workflow_job", fakegithub.NewDeliveryID(), body)
		g.Expect(err).NotTo(HaveOccurred())
		return status
	}).WithTimeout(5 * time.Second).Should(Equal(http.StatusAccepted))
	g.Eventually(func() int { return h.snapshot(g, pool).Queued }).WithTimeout(10 * time.Second).Should(Equal(1))
}

// TestBodyLimit: a signed delivery of up to 256 KiB is read; one byte more is refused with 413,
// signature or not, before it is parsed.
func TestBodyLimit(t *testing.T) {
	h := startReceiver(t, webhook.Config{}, true)
	pool := h.createPool(t, "linux", linuxPool)
	base := job{id: 13, action: "queued"}.payload()
	pad := func(n int) []byte { // valid JSON of exactly n bytes: the payload, then spaces
		return append(append([]byte(nil), base...), bytes.Repeat([]byte(" "), n-len(base))...)
	}
	tests := []struct {
		name string
		body []byte
		want int
	}{
		{name: "256 KiB", body: pad(int(webhook.DefaultMaxBodyBytes)), want: http.StatusAccepted},
		{name: "256 KiB and one byte", body: pad(int(webhook.DefaultMaxBodyBytes) + 1), want: http.StatusRequestEntityTooLarge},
		{name: "1 MiB", body: pad(1 << 20), want: http.StatusRequestEntityTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(h.post(g, fakegithub.NewDeliveryID(), tt.body)).To(Equal(tt.want))
		})
	}
	g := NewWithT(t)
	h.waitIdle(g)
	g.Expect(h.snapshot(g, pool).Queued).To(Equal(1))
	g.Expect(webhook.DefaultMaxBodyBytes).To(Equal(int64(256 << 10)))
}
