package scale

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/hyperfleet-io/hyperfleet/pkg/agent"
	"github.com/hyperfleet-io/hyperfleet/pkg/bootstrap/protocol"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/test/fakegithub"
	"github.com/hyperfleet-io/hyperfleet/test/pvesim"
)

// guests is the simulated guest OS of every runner VM: the simulator's boot hook. A VM's guest
// does what HyperFleet's agent does on the wire, in-process so that a thousand VMs fit on a small
// machine: it redeems its join token with the bootstrap service for an SVID, fetches its one-time
// runner config over mTLS, and then, as GitHub's runner with that JIT config, takes one job from
// the fake GitHub, finishes it and powers the VM off. With hold set, a guest keeps its job until
// release is called, so a burst can be measured with every VM alive at once.
type guests struct {
	hold bool
	// poll is how often a runner asks for a job; idle is how long it waits for one before it
	// goes offline and the VM powers off (the runner's idle timeout); jobTime is how long a job
	// runs when jobs are not held.
	poll, idle, jobTime time.Duration

	released chan struct{}
	once     sync.Once

	mu          sync.Mutex
	records     map[string]*guestRecord // by host and VM, the latest boot
	inFlight    int                     // attest + runner config under way
	maxInFlight int
	errs        []error
}

// guestRecord is what one VM's guest did, with timestamps.
type guestRecord struct {
	VM                                     string
	Booted, Attested, Configured, JobTaken time.Time
	Job                                    int64
	Runner                                 string
	Err                                    error
	attestStart                            time.Time
}

func newGuests(hold bool, poll, idle time.Duration) *guests {
	return &guests{hold: hold, poll: poll, idle: idle, released: make(chan struct{}), records: map[string]*guestRecord{}}
}

// release lets every held job finish (and the VMs power off).
func (g *guests) release() { g.once.Do(func() { close(g.released) }) }

// snapshot copies the records.
func (g *guests) snapshot() []guestRecord {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]guestRecord, 0, len(g.records))
	for _, r := range g.records {
		out = append(out, *r)
	}
	return out
}

func (g *guests) errors() []error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]error(nil), g.errs...)
}

func (g *guests) update(rec *guestRecord, fn func(*guestRecord)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	fn(rec)
}

// hook is the simulator's BootHook.
func (g *guests) hook(ctx context.Context, vm pvesim.BootVM) error {
	cfg, err := agent.ConfigFromUserData(vm.UserData, agent.DefaultConfigPath)
	if err != nil {
		// Not a runner: like any guest OS it runs until it is stopped.
		<-ctx.Done()
		return ctx.Err()
	}
	key := fmt.Sprintf("%s/%d/%s", vm.Node, vm.VMID, vm.Name)
	rec := &guestRecord{VM: key, Booted: time.Now()}
	g.mu.Lock()
	g.records[key] = rec
	g.mu.Unlock()
	err = g.live(ctx, cfg, rec)
	if err != nil && ctx.Err() == nil {
		g.mu.Lock()
		rec.Err = err
		g.errs = append(g.errs, fmt.Errorf("VM %s: %w", key, err))
		g.mu.Unlock()
	}
	return err
}

func (g *guests) live(ctx context.Context, cfg *agent.Config, rec *guestRecord) error {
	td, err := spiffeid.TrustDomainFromString(cfg.TrustDomain)
	if err != nil {
		return err
	}
	bundle, err := x509bundle.Parse(td, []byte(cfg.CABundle))
	if err != nil {
		return err
	}
	service := tlsconfig.AuthorizeID(identity.BootstrapServiceID(td))
	g.mu.Lock()
	rec.attestStart = time.Now()
	g.inFlight++
	g.maxInFlight = max(g.maxInFlight, g.inFlight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		if rec.Configured.IsZero() {
			g.inFlight--
		}
		g.mu.Unlock()
	}()

	// Attest: the join token and a CSR for the VM's SVID, over server-authenticated TLS.
	key, csr, err := identity.NewKeyAndCSR()
	if err != nil {
		return err
	}
	tlsClient := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsconfig.TLSClientConfig(bundle, service)}}
	defer tlsClient.CloseIdleConnections()
	body, _ := json.Marshal(protocol.AttestRequest{JoinToken: cfg.JoinToken, CSR: string(csr)})
	var ar protocol.AttestResponse
	if err := retry(ctx, 2*time.Minute, func() error {
		return call(ctx, tlsClient, http.MethodPost, cfg.ServiceURL+protocol.AttestPath, body, &ar)
	}); err != nil {
		return fmt.Errorf("attesting: %w", err)
	}
	svid, err := identity.SVIDFromPEM([]byte(ar.SVID), key)
	if err != nil {
		return err
	}
	g.update(rec, func(r *guestRecord) { r.Attested = time.Now() })

	// The one-time runner config over mTLS with the SVID.
	mtls := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: tlsconfig.MTLSClientConfig(staticSVID{svid}, bundle, service)}}
	defer mtls.CloseIdleConnections()
	var rc protocol.RunnerConfig
	if err := retry(ctx, 2*time.Minute, func() error {
		return call(ctx, mtls, http.MethodGet, cfg.ServiceURL+protocol.RunnerConfigPath, nil, &rc)
	}); err != nil {
		return fmt.Errorf("fetching the runner config: %w", err)
	}
	g.mu.Lock()
	rec.Configured, rec.Runner = time.Now(), rc.RunnerName
	g.inFlight--
	g.mu.Unlock()

	// The runner: one job, as run.sh --jitconfig does.
	runner, err := fakegithub.NewRunnerClient(rc.Secret(), nil)
	if err != nil {
		return err
	}
	if err := retry(ctx, time.Minute, func() error { return runner.Online(ctx) }); err != nil {
		return err
	}
	idle := time.After(g.idle)
	for {
		id, err := runner.Acquire(ctx)
		if err == nil {
			g.update(rec, func(r *guestRecord) { r.Job, r.JobTaken = id, time.Now() })
			break
		}
		// No job yet, or a transient failure: ask again at the next poll.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-idle:
			return runner.Offline(context.WithoutCancel(ctx))
		case <-time.After(g.poll):
		}
	}
	if g.hold {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-g.released:
		}
	} else {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(g.jobTime):
		}
	}
	return retry(ctx, time.Minute, func() error { return runner.Complete(ctx, rec.Job, "success") })
}

type staticSVID struct{ svid *x509svid.SVID }

func (s staticSVID) GetX509SVID() (*x509svid.SVID, error) { return s.svid, nil }

// finalError is an answer retrying cannot change (a 4xx other than 429).
type finalError struct{ error }

// retry calls fn until it succeeds, fails finally, ctx ends or window has passed.
func retry(ctx context.Context, window time.Duration, fn func() error) error {
	deadline := time.Now().Add(window)
	for {
		err := fn()
		var fe finalError
		if err == nil || errors.As(err, &fe) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// call does one request to the bootstrap service and decodes its answer into out.
func call(ctx context.Context, c *http.Client, method, url string, body []byte, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(data)))
	case resp.StatusCode >= 400:
		return finalError{fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(data)))}
	}
	return json.Unmarshal(data, out)
}
