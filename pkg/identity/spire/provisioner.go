package spire

import (
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	agentv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/agent/v1"
	bundlev1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/bundle/v1"
	entryv1 "github.com/spiffe/spire-api-sdk/proto/spire/api/server/entry/v1"
	"github.com/spiffe/spire-api-sdk/proto/spire/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// DefaultSelector is what the registration entry asks of the VM's workload: running as root, as
// the HyperFleet agent does (see bootstrap.AgentUnitPath).
const DefaultSelector = "unix:uid:0"

// Config configures a Provisioner for one SPIRE server.
type Config struct {
	// Address of the server's admin API: unix:///path for its local socket (socket_path in the
	// server config), or host:port over mTLS (see DialOptions).
	Address string
	// Dial authenticates TCP connections.
	Dial DialOptions
	// Selectors the VM's workload must match, "type:value" (e.g. unix:uid:0); DefaultSelector if empty.
	Selectors []string
	// X509SVIDTTL of the machine's SVIDs; zero leaves the server's default_x509_svid_ttl.
	X509SVIDTTL time.Duration
	// EntryLifetime, when set, makes the server drop the registration entry that long after it was
	// created, so entries of long-gone VMs do not pile up. It must exceed a runner VM's lifetime.
	EntryLifetime time.Duration
	// Hint is set on registration entries so operators can tell HyperFleet's apart; default "hyperfleet".
	Hint string
}

// Provisioner mints single-use SPIRE join tokens and the registration entry that maps a token's
// agent to its Machine's SPIFFE ID.
type Provisioner struct {
	cfg     Config
	closer  io.Closer
	agents  agentv1.AgentClient
	entries entryv1.EntryClient
	bundles bundlev1.BundleClient
	now     func() time.Time

	mu       sync.Mutex
	serverTD spiffeid.TrustDomain
}

var (
	_ identity.Provisioner       = (*Provisioner)(nil)
	_ identity.Releaser          = (*Provisioner)(nil)
	_ identity.RedemptionChecker = (*Provisioner)(nil)
)

// NewProvisioner connects to the SPIRE server in cfg. Over a Unix socket the connection is made on
// first use; over TCP it first fetches HyperFleet's own SVID, bounded by ctx.
func NewProvisioner(ctx context.Context, cfg Config) (*Provisioner, error) {
	if _, err := parseSelectors(cfg.Selectors); err != nil {
		return nil, err
	}
	conn, closer, err := dial(ctx, cfg.Address, cfg.Dial)
	if err != nil {
		return nil, err
	}
	return newProvisioner(cfg, conn, closer), nil
}

func newProvisioner(cfg Config, conn grpc.ClientConnInterface, closer io.Closer) *Provisioner {
	return &Provisioner{
		cfg: cfg, closer: closer, now: time.Now,
		agents: agentv1.NewAgentClient(conn), entries: entryv1.NewEntryClient(conn), bundles: bundlev1.NewBundleClient(conn),
	}
}

// Close releases the connection to the server.
func (p *Provisioner) Close() error { return p.closer.Close() }

// Address is the admin API this provisioner talks to.
func (p *Provisioner) Address() string { return p.cfg.Address }

// AgentID is the SPIFFE ID SPIRE gives an agent attested with token.
func AgentID(td spiffeid.TrustDomain, token string) (spiffeid.ID, error) {
	return spiffeid.FromSegments(td, "spire", "agent", "join_token", token)
}

// Provision creates a join token valid for ttl and a registration entry that gives the workload on
// the agent attested with it m's SPIFFE ID. SPIRE keeps the token (Credential.TokenHash is empty)
// and deletes it on the first attestation attempt. The token is created first: should the entry
// fail, the unused token expires on its own, whereas an entry without a token would stay.
func (p *Provisioner) Provision(ctx context.Context, td spiffeid.TrustDomain, m identity.Machine, ttl time.Duration) (identity.Credential, error) {
	serverTD, err := p.trustDomain(ctx)
	if err != nil {
		return identity.Credential{}, err
	}
	if td != serverTD {
		return identity.Credential{}, fmt.Errorf("%w: %s (the SPIRE server at %s serves %s)", ErrTrustDomainMismatch, td, p.cfg.Address, serverTD)
	}
	id, err := identity.MachineID(td, m.Namespace, m.Name)
	if err != nil {
		return identity.Credential{}, err
	}
	selectors, err := parseSelectors(p.cfg.Selectors)
	if err != nil {
		return identity.Credential{}, err
	}
	token, err := p.agents.CreateJoinToken(ctx, &agentv1.CreateJoinTokenRequest{Ttl: seconds(ttl)})
	if err != nil {
		return identity.Credential{}, classify("creating join token", err)
	}
	agentID, err := AgentID(td, token.Value)
	if err != nil {
		return identity.Credential{}, fmt.Errorf("join token from SPIRE: %w", err)
	}
	entry := &types.Entry{
		SpiffeId:  &types.SPIFFEID{TrustDomain: td.Name(), Path: id.Path()},
		ParentId:  &types.SPIFFEID{TrustDomain: td.Name(), Path: agentID.Path()},
		Selectors: selectors,
		Hint:      p.hint(),
	}
	if p.cfg.X509SVIDTTL > 0 {
		entry.X509SvidTtl = seconds(p.cfg.X509SVIDTTL)
	}
	if p.cfg.EntryLifetime > 0 {
		entry.ExpiresAt = p.now().Add(p.cfg.EntryLifetime).Unix()
	}
	if err := p.createEntry(ctx, entry); err != nil {
		return identity.Credential{}, err
	}
	return identity.Credential{ID: id, JoinToken: token.Value, ExpiresAt: time.Unix(token.ExpiresAt, 0)}, nil
}

func (p *Provisioner) createEntry(ctx context.Context, entry *types.Entry) error {
	resp, err := p.entries.BatchCreateEntry(ctx, &entryv1.BatchCreateEntryRequest{Entries: []*types.Entry{entry}})
	if err != nil {
		return classify("creating registration entry", err)
	}
	if len(resp.Results) != 1 {
		return fmt.Errorf("creating registration entry: %d results for 1 entry", len(resp.Results))
	}
	st := resp.Results[0].Status
	if code := codes.Code(st.GetCode()); code != codes.OK && code != codes.AlreadyExists {
		return classifyCode("creating registration entry", code, st.GetMessage(), nil)
	}
	return nil
}

// Release undoes Provision once m is gone: it deletes the registration entries HyperFleet created
// for m's SPIFFE ID and evicts the agent they hang off, so a VM that outlived its Machine can
// neither renew its SVID nor attest again. Releasing what is already gone is not an error.
func (p *Provisioner) Release(ctx context.Context, td spiffeid.TrustDomain, m identity.Machine) error {
	entries, err := p.machineEntries(ctx, td, m)
	if err != nil || len(entries) == 0 {
		return err
	}
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		ids = append(ids, e.Id)
	}
	// The agent first: while its entries exist, a failure here is retried with them in place.
	for _, e := range entries {
		if !strings.HasPrefix(e.ParentId.GetPath(), "/spire/agent/") {
			continue
		}
		_, err := p.agents.DeleteAgent(ctx, &agentv1.DeleteAgentRequest{Id: e.ParentId})
		if err != nil && status.Code(err) != codes.NotFound {
			return classify("evicting the machine's SPIRE agent", err)
		}
	}
	del, err := p.entries.BatchDeleteEntry(ctx, &entryv1.BatchDeleteEntryRequest{Ids: ids})
	if err != nil {
		return classify("deleting registration entries", err)
	}
	for _, r := range del.Results {
		if code := codes.Code(r.Status.GetCode()); code != codes.OK && code != codes.NotFound {
			return classifyCode("deleting registration entry "+r.Id, code, r.Status.GetMessage(), nil)
		}
	}
	return nil
}

// Redeemed tells whether a spire-agent has attested with m's join token: whether the agent its
// registration entries hang off is known to the server. (SPIRE deletes a token on its first use,
// so the token itself cannot tell a spent one from an expired one.)
func (p *Provisioner) Redeemed(ctx context.Context, td spiffeid.TrustDomain, m identity.Machine) (bool, error) {
	entries, err := p.machineEntries(ctx, td, m)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.ParentId.GetPath(), "/spire/agent/") {
			continue
		}
		_, err := p.agents.GetAgent(ctx, &agentv1.GetAgentRequest{Id: e.ParentId})
		switch {
		case err == nil:
			return true, nil
		case status.Code(err) != codes.NotFound:
			return false, classify("reading the machine's SPIRE agent", err)
		}
	}
	return false, nil
}

// machineEntries lists the registration entries HyperFleet created for m.
func (p *Provisioner) machineEntries(ctx context.Context, td spiffeid.TrustDomain, m identity.Machine) ([]*types.Entry, error) {
	id, err := identity.MachineID(td, m.Namespace, m.Name)
	if err != nil {
		return nil, err
	}
	resp, err := p.entries.ListEntries(ctx, &entryv1.ListEntriesRequest{Filter: &entryv1.ListEntriesRequest_Filter{
		BySpiffeId: &types.SPIFFEID{TrustDomain: td.Name(), Path: id.Path()},
		ByHint:     wrapperspb.String(p.hint()),
	}})
	if err != nil {
		return nil, classify("listing registration entries", err)
	}
	return resp.Entries, nil
}

// TrustBundlePEM returns the server's X.509 authorities: spire-agent's trust_bundle, and what the
// VM uses to verify SVIDs of its trust domain.
func (p *Provisioner) TrustBundlePEM(ctx context.Context) ([]byte, error) {
	b, err := p.bundle(ctx)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, a := range b.X509Authorities {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.Asn1})...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: the SPIRE server's bundle has no X.509 authority yet", ErrUnavailable)
	}
	return out, nil
}

// trustDomain asks the server which trust domain it serves, once: it cannot change while it runs.
func (p *Provisioner) trustDomain(ctx context.Context) (spiffeid.TrustDomain, error) {
	p.mu.Lock()
	td := p.serverTD
	p.mu.Unlock()
	if !td.IsZero() {
		return td, nil
	}
	if _, err := p.bundle(ctx); err != nil {
		return spiffeid.TrustDomain{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.serverTD, nil
}

func (p *Provisioner) bundle(ctx context.Context) (*types.Bundle, error) {
	b, err := p.bundles.GetBundle(ctx, &bundlev1.GetBundleRequest{})
	if err != nil {
		return nil, classify("reading the trust bundle", err)
	}
	td, err := spiffeid.TrustDomainFromString(b.TrustDomain)
	if err != nil {
		return nil, fmt.Errorf("SPIRE server bundle: %w", err)
	}
	p.mu.Lock()
	p.serverTD = td
	p.mu.Unlock()
	return b, nil
}

func (p *Provisioner) hint() string {
	if p.cfg.Hint != "" {
		return p.cfg.Hint
	}
	return "hyperfleet"
}

// parseSelectors turns "type:value" strings (value may contain colons) into SPIRE selectors.
func parseSelectors(in []string) ([]*types.Selector, error) {
	if len(in) == 0 {
		in = []string{DefaultSelector}
	}
	out := make([]*types.Selector, 0, len(in))
	for _, s := range in {
		typ, value, ok := strings.Cut(s, ":")
		if !ok || typ == "" || value == "" {
			return nil, fmt.Errorf("selector %q: want type:value, e.g. %s", s, DefaultSelector)
		}
		out = append(out, &types.Selector{Type: typ, Value: value})
	}
	return out, nil
}

// seconds rounds d up to whole seconds, at least one, as SPIRE's TTL fields take.
func seconds(d time.Duration) int32 {
	s := math.Ceil(d.Seconds())
	switch {
	case s < 1:
		return 1
	case s > math.MaxInt32:
		return math.MaxInt32
	}
	return int32(s)
}
