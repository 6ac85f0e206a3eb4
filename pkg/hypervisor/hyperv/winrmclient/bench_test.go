package winrmclient

import (
	"context"
	"testing"

	"github.com/hyperfleet-io/hyperfleet/test/hvsim"
)

// BenchmarkRunPowerShell measures one short script per run over loopback HTTPS, with the WS-Man
// requests each run costs (Create, Command, Receive, Signal, Delete, plus NTLM's handshake on a
// new connection).
func BenchmarkRunPowerShell(b *testing.B) {
	for _, auth := range []string{AuthBasic, AuthNTLM} {
		b.Run(auth, func(b *testing.B) {
			e := newEnv(b, hvsim.Options{TLS: true})
			c := e.client(b, e.config(auth))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.RunPowerShell(context.Background(), "whoami"); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(sum(e.srv.Stats().Calls))/float64(b.N), "wsman-requests/op")
		})
	}
}
