package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/spiffe/go-spiffe/v2/workloadapi"
)

// spireIssueGrace is how long after the join token's expiry an SVID may still arrive: spire-agent
// may redeem the token at the last moment, and the server then issues within seconds.
const spireIssueGrace = time.Minute

// attestSPIRE waits for the Workload API to hand this workload its X509-SVID. The source keeps
// the SVID and the trust bundle current for as long as the VM lives; nothing touches the disk.
// No SVID by the deadline means spire-agent could not attest (token refused, used or expired) or no
// registration entry matches this workload: final, like a refused token.
func (a *Agent) attestSPIRE(ctx context.Context) (*credentials, error) {
	deadline := time.Now().Add(a.opts.RetryWindow)
	if exp := a.cfg.TokenExpiresAt; exp != nil && exp.Add(spireIssueGrace).Before(deadline) {
		deadline = exp.Add(spireIssueGrace)
	}
	waitCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	source, err := workloadapi.NewX509Source(waitCtx, workloadapi.WithClientOptions(workloadapi.WithAddr(a.cfg.WorkloadAPIAddress)))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &refusedError{msg: fmt.Sprintf("no X509-SVID from the SPIRE Workload API at %s by %s: spire-agent did not attest "+
			"(join token refused, used or expired) or no registration entry matches this workload: %v",
			a.cfg.WorkloadAPIAddress, deadline.UTC().Format(time.RFC3339), err)}
	}
	svid, err := source.GetX509SVID()
	if err != nil {
		_ = source.Close()
		return nil, err
	}
	a.scrubSPIREJoinToken()
	return &credentials{svid: source, bundle: source, id: svid.ID, expires: svid.Certificates[0].NotAfter,
		close: func() { _ = source.Close() }}, nil
}
