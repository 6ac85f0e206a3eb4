package service_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/service"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
)

// clientFrom is an HTTPS client whose connections come from the loopback address src, so one test
// can play several client addresses.
func clientFrom(src string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // who the server is does not matter here
}

// TestAttestEndpointsAreRateLimited plays an unauthenticated client hammering the attestation
// endpoints from one address: past its burst it gets 429 with Retry-After, a VM at another address
// still attests meanwhile, and the flooder itself is served again once it waits.
func TestAttestEndpointsAreRateLimited(t *testing.T) {
	g := NewWithT(t)
	h := startServiceWith(t, nil, func(o *service.Options) {
		o.Limits = service.Limits{PerClientRate: 1, PerClientBurst: 3, MaxInFlight: 8}
	})
	flooder := clientFrom("127.0.0.2")
	paths := []string{protocol.AttestPath, protocol.TPMAttestPath, protocol.TPMActivatePath}
	statuses := map[int]int{}
	retryAfter := 0
	for i := range 20 {
		resp, err := flooder.Post(h.url+paths[i%len(paths)], "application/json", strings.NewReader(`{"joinToken":"x"}`))
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		statuses[resp.StatusCode]++
		if resp.StatusCode == http.StatusTooManyRequests {
			retryAfter, err = strconv.Atoi(resp.Header.Get("Retry-After"))
			g.Expect(err).NotTo(HaveOccurred(), "429 says when to come back")
			g.Expect(retryAfter).To(BeNumerically(">=", 1))
		}
	}
	g.Expect(statuses[http.StatusTooManyRequests]).To(BeNumerically(">=", 15), "%v", statuses)

	m := h.machine(t, "rate-vm", time.Minute)
	svid, status := h.attest(t, m.Token)
	g.Expect(status).To(Equal(http.StatusOK), "a VM at another address is not held up by the flood")
	g.Expect(svid.ID).To(Equal(m.ID))

	time.Sleep(time.Duration(retryAfter) * time.Second)
	resp, err := flooder.Post(h.url+protocol.AttestPath, "application/json", strings.NewReader(`{}`))
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), "served again after Retry-After")
}

// TestAttestConcurrencyIsCapped plays a client that opens attestation requests and never finishes
// sending them: once the in-flight cap is taken, others get 503 instead of piling up, and the
// service recovers when the slow requests go.
func TestAttestConcurrencyIsCapped(t *testing.T) {
	g := NewWithT(t)
	h := startServiceWith(t, nil, func(o *service.Options) {
		o.Limits = service.Limits{PerClientRate: 1000, PerClientBurst: 1000, MaxInFlight: 2}
	})
	addr := strings.TrimPrefix(h.url, "https://")
	var slow []net.Conn
	for range 2 {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // as above
		g.Expect(err).NotTo(HaveOccurred())
		_, err = c.Write([]byte("POST " + protocol.AttestPath + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{"))
		g.Expect(err).NotTo(HaveOccurred())
		slow = append(slow, c)
	}
	other := clientFrom("127.0.0.3")
	g.Eventually(func(g Gomega) {
		resp, err := other.Post(h.url+protocol.AttestPath, "application/json", strings.NewReader(`{}`))
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable))
		g.Expect(resp.Header.Get("Retry-After")).NotTo(BeEmpty())
	}, 5*time.Second, 50*time.Millisecond).Should(Succeed())

	for _, c := range slow {
		_ = c.Close()
	}
	m := h.machine(t, "cap-vm", time.Minute)
	g.Eventually(func() int {
		_, status := h.attest(t, m.Token)
		return status
	}, 5*time.Second, 100*time.Millisecond).Should(Equal(http.StatusOK))
}

// stallingClient is an API server that stops answering the status writes stall selects: the write
// returns only when its context ends.
type stallingClient struct {
	client.Client
	stall       func(*bootstrapv1.BootstrapConfig) bool
	stalled     atomic.Bool
	hadDeadline atomic.Bool
}

func (c *stallingClient) Status() client.SubResourceWriter {
	return &stallingStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type stallingStatus struct {
	client.SubResourceWriter
	c *stallingClient
}

func (s *stallingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if bc, ok := obj.(*bootstrapv1.BootstrapConfig); ok && s.c.stall(bc) {
		_, deadline := ctx.Deadline()
		s.c.hadDeadline.Store(deadline)
		s.c.stalled.Store(true)
		<-ctx.Done()
		return ctx.Err()
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}

// TestStatusWritesAfterTheRequestHaveDeadlines: the writes that outlive a runner-config request
// must not hang on a stalled API server.
func TestStatusWritesAfterTheRequestHaveDeadlines(t *testing.T) {
	tests := []struct {
		name   string
		stall  func(*bootstrapv1.BootstrapConfig) bool
		before func(h *harness)
		want   int
	}{
		{name: "recording the attestation", want: http.StatusOK,
			stall: func(bc *bootstrapv1.BootstrapConfig) bool { return bc.Status.AttestedTime != nil }},
		{name: "giving back a claim GitHub never answered", want: http.StatusBadGateway,
			before: func(h *harness) { h.gh.FailNext(fakegithub.EndpointRepoJITConfig, 10, http.StatusUnprocessableEntity) },
			stall: func(bc *bootstrapv1.BootstrapConfig) bool {
				return conditions.GetReason(bc, bootstrapv1.AttestedCondition) == bootstrapv1.RunnerConfigFailedReason
			}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			api := &stallingClient{Client: env.Client, stall: tt.stall}
			h := startServiceWith(t, nil, func(o *service.Options) { o.Client, o.APITimeout = api, time.Second })
			m := h.machine(t, "stall-"+string(rune('a'+i)), time.Minute)
			svid, status := h.attest(t, m.Token)
			g.Expect(status).To(Equal(http.StatusOK))
			if tt.before != nil {
				tt.before(h)
			}
			start := time.Now()
			status, _, err := h.runnerConfig(h.mtls(svid)) // the client gives up after 30 s
			g.Expect(err).NotTo(HaveOccurred(), "the service answers despite the stalled write")
			g.Expect(status).To(Equal(tt.want))
			g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
			g.Expect(api.stalled.Load()).To(BeTrue(), "the write did reach the stalled API")
			g.Expect(api.hadDeadline.Load()).To(BeTrue())
		})
	}
}

// TestRequestSizeIsCapped: an oversized body or header is refused before it is buffered whole.
func TestRequestSizeIsCapped(t *testing.T) {
	g := NewWithT(t)
	h := startService(t)
	c := clientFrom("127.0.0.4")
	resp, err := c.Post(h.url+protocol.AttestPath, "application/json", bytes.NewReader(bytes.Repeat([]byte(" "), 1<<20)))
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))

	req, err := http.NewRequest(http.MethodPost, h.url+protocol.AttestPath, strings.NewReader(`{}`))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("X-Padding", strings.Repeat("a", 64<<10))
	resp, err = c.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusRequestHeaderFieldsTooLarge))
}
