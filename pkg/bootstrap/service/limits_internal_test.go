package service

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestFloodOfAddressesResetsNoLimit plays an attacker who has spent its burst and then sends from
// more addresses than the per-client table holds, to push its own bucket out and start afresh. Its
// own address must stay limited, addresses the table cannot hold must not each get a burst of
// their own, and the table must not grow. An IPv6 sender owns at least a /64, so addresses within
// one /64 are one client.
func TestFloodOfAddressesResetsNoLimit(t *testing.T) {
	const burst = 3
	tests := []struct {
		name     string
		attacker string
		// flood is the i-th address the attacker sends from to fill the table.
		flood func(i int) string
		// later are addresses of the attacker's tried after the flood, all to be refused.
		later []string
	}{
		{name: "IPv4 addresses", attacker: "192.0.2.7",
			flood: func(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&0xff, i>>8&0xff, i&0xff) },
			later: []string{"192.0.2.7"}},
		{name: "IPv6 /64 prefixes", attacker: "2001:db8:aa:1::1",
			flood: func(i int) string { return fmt.Sprintf("2001:db8:bb:%x::1", i) },
			later: []string{"2001:db8:aa:1::1", "2001:db8:aa:1::2", "2001:db8:aa:1:ffff:ffff:ffff:ffff"}},
		{name: "addresses of the attacker's own /64", attacker: "2001:db8:cc:1::1",
			flood: func(i int) string { return fmt.Sprintf("2001:db8:cc:1::%x:%x", i>>16+1, i&0xffff) },
			later: []string{"2001:db8:cc:1::1", "2001:db8:cc:1::dead:beef"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			now := time.Unix(1_700_000_000, 0)
			l := newLimiter(Limits{PerClientRate: 1, PerClientBurst: burst}, func() time.Time { return now })

			for range burst {
				_, ok := l.allow(tt.attacker)
				g.Expect(ok).To(BeTrue())
			}
			_, ok := l.allow(tt.attacker)
			g.Expect(ok).To(BeFalse(), "the burst is spent")

			floodAllowed := 0
			for i := range maxClients + 100 {
				if _, ok := l.allow(tt.flood(i)); ok {
					floodAllowed++
				}
			}
			for _, addr := range tt.later {
				wait, ok := l.allow(addr)
				g.Expect(ok).To(BeFalse(), "%s is still limited after the flood", addr)
				g.Expect(wait).To(BeNumerically(">=", time.Second))
			}
			g.Expect(len(l.clients)).To(BeNumerically("<=", maxClients), "the table does not grow")
			g.Expect(floodAllowed).To(BeNumerically("<=", maxClients+burst),
				"addresses beyond the table share one bucket instead of each getting a fresh one")

			// Limits are a rate, not a ban: once tokens come back, the address is served again.
			now = now.Add(2 * time.Second)
			_, ok = l.allow(tt.later[0])
			g.Expect(ok).To(BeTrue(), "served again once its bucket refills")
		})
	}
}
