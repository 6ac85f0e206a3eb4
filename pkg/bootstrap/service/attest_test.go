package service_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/bootstraptest"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

func TestBuiltinAttestation(t *testing.T) {
	h := startService(t)
	tests := []struct {
		name   string
		ttl    time.Duration
		token  func(m *bootstraptest.Machine) string
		before func(t *testing.T, m *bootstraptest.Machine)
		want   int
	}{
		{name: "fresh token is redeemed", ttl: time.Minute, want: http.StatusOK},
		{name: "second use is refused", ttl: time.Minute, want: http.StatusConflict,
			before: func(t *testing.T, m *bootstraptest.Machine) {
				_, status := h.attest(t, m.Token)
				NewWithT(t).Expect(status).To(Equal(http.StatusOK))
			}},
		{name: "expired token is refused", ttl: -time.Second, want: http.StatusGone},
		{name: "forged secret is refused", ttl: time.Minute, want: http.StatusUnauthorized,
			token: func(m *bootstraptest.Machine) string { return m.Token[:len(m.Token)-4] + "0000" }},
		{name: "malformed token is refused", ttl: time.Minute, want: http.StatusUnauthorized,
			token: func(*bootstraptest.Machine) string { return "not-a-token" }},
		{name: "token of a deleted Machine is refused", ttl: time.Minute, want: http.StatusForbidden,
			before: func(t *testing.T, m *bootstraptest.Machine) {
				NewWithT(t).Expect(env.Client.Delete(context.Background(), m.Machine)).To(Succeed())
			}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := h.machine(t, "attest-"+string(rune('a'+i)), tt.ttl)
			if tt.before != nil {
				tt.before(t, m)
			}
			token := m.Token
			if tt.token != nil {
				token = tt.token(m)
			}
			svid, status := h.attest(t, token)
			g.Expect(status).To(Equal(tt.want))
			if tt.want != http.StatusOK {
				return
			}
			g.Expect(svid.ID).To(Equal(m.ID))
			g.Expect(svid.ID.String()).To(Equal("spiffe://hyperfleet.test/hyperfleet/machine/" + h.fleet.Namespace + "/" + m.Machine.Name))
			g.Expect(svid.Certificates[0].NotAfter).To(BeTemporally("<=", time.Now().Add(time.Hour+time.Minute)))
			cfg := bootstraptest.Get(t, env.Client, m.Config)
			g.Expect(cfg.Status.JoinToken.RedeemedTime).NotTo(BeNil(), "redemption is recorded in the API server")
		})
	}
}

func TestConcurrentRedemptionSucceedsOnce(t *testing.T) {
	g := NewWithT(t)
	h := startService(t)
	m := h.machine(t, "race", time.Minute)
	const callers = 8
	var wg sync.WaitGroup
	statuses := make(chan int, callers)
	start := make(chan struct{})
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, status := h.attest(t, m.Token)
			statuses <- status
		}()
	}
	close(start)
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	g.Expect(counts).To(Equal(map[int]int{http.StatusOK: 1, http.StatusConflict: callers - 1}))
}

func TestJoinTokenFormat(t *testing.T) {
	g := NewWithT(t)
	tok, err := identity.NewJoinToken(identity.JoinTokenRef{Namespace: "ns", Name: "m.1"})
	g.Expect(err).NotTo(HaveOccurred())
	ref, err := identity.ParseJoinToken(tok)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ref).To(Equal(identity.JoinTokenRef{Namespace: "ns", Name: "m.1"}))
	g.Expect(identity.JoinTokenMatches(tok, identity.HashJoinToken(tok))).To(BeTrue())
	g.Expect(identity.HashJoinToken(tok)).NotTo(ContainSubstring(strings.Split(tok, "_")[3]))
}
