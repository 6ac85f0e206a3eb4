package platform

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
)

// Inputs are what every platform's Source is built from; each process (the manager, the bootstrap
// service, devfleet) fills them once. A platform needs nothing else: its per-pool settings come
// from the pool's spec.platform and the Secrets it names.
type Inputs struct {
	// Reader reads the Secrets a pool names (credentials, CA bundle), in the pool's namespace
	// only; a namespace no admin enabled answers tenancy.ErrNamespaceNotEnabled.
	Reader client.Reader
	// Transport is the base round tripper; nil uses http.DefaultTransport. A pool's CA bundle is
	// layered on a clone of it.
	Transport http.RoundTripper
	// HTTPTimeout bounds each API call when the pool does not set its own; 0 means 30s.
	HTTPTimeout time.Duration
	// Now is the clock (token expiry, webhook signature age, rate-limit reset); nil is time.Now.
	Now func() time.Time
}

// Clock returns in.Now, or time.Now when unset.
func (in Inputs) Clock() func() time.Time {
	if in.Now == nil {
		return time.Now
	}
	return in.Now
}

// Driver is one platform's registration: how to build its Source and how to read its webhooks
// before any pool is known.
type Driver struct {
	Kind Kind
	// NewSource builds the platform's Source. It is called once per process.
	NewSource func(Inputs) (Source, error)
	// Webhooks parses deliveries to /webhooks/<kind> with the secret the manager's configuration
	// holds for that route; it needs no pool and no credentials.
	Webhooks WebhookParser
	// NewPollers, when set, builds the pollers of the platform's pools whose demand comes from
	// polling its API; the manager runs them on its leader and feeds their polls to the ledger.
	NewPollers func(Inputs, DemandFeed) (Pollers, error)
	// WebhookSecret is the manager's setting that holds the secret of the route /webhooks/<kind>
	// (pkg/config binds it as a flag and an environment variable); the route refuses every
	// delivery while it is empty.
	WebhookSecret Setting
	// CheckDelivery, when set, judges a delivery from its headers alone, before its body is read:
	// proven when a header carries the secret itself (a token compared here), an error wrapping
	// ErrInvalidSignature for a delivery to refuse at once. Without it every delivery waits for
	// its body, and Webhooks alone decides.
	CheckDelivery func(header http.Header, secret []byte) (proven bool, err error)
}

// Setting is one of the manager's settings a driver declares: its command-line flag, its
// environment variable, and what it is for.
type Setting struct {
	Flag, Env, Usage string
}

// kindName is what a kind may be called: its route and spec.platform member.
var kindName = regexp.MustCompile(`^[a-z][a-z0-9]{1,30}$`)

var (
	registryMu sync.RWMutex
	registry   = map[Kind]Driver{}
	// order is the kinds in the order they registered.
	order []Kind
)

// Register adds a platform's driver; each platform package calls it from an init function, and
// pkg/platform/all imports every platform package. Registering a kind twice, a kind not spelt as
// a route can be, or an incomplete driver panics: it is a programming error found at start-up.
func Register(d Driver) {
	registryMu.Lock()
	defer registryMu.Unlock()
	s := d.WebhookSecret
	if !kindName.MatchString(string(d.Kind)) || d.NewSource == nil || d.Webhooks == nil || s.Flag == "" || s.Env == "" || s.Usage == "" {
		panic(fmt.Sprintf("platform.Register: incomplete driver for %q", d.Kind))
	}
	if _, dup := registry[d.Kind]; dup {
		panic(fmt.Sprintf("platform.Register: %q registered twice", d.Kind))
	}
	registry[d.Kind] = d
	order = append(order, d.Kind)
	// Its metrics are labelled with its kind, not "other".
	metrics.AllowPlatform(string(d.Kind))
}

// Lookup returns the registered driver of kind.
func Lookup(kind Kind) (Driver, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	d, ok := registry[kind]
	return d, ok
}

// Registered lists the kinds with a driver, in the order they registered.
func Registered() []Kind {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return slices.Clone(order)
}

// Drivers lists the registered drivers, in the order they registered.
func Drivers() []Driver {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]Driver, 0, len(order))
	for _, k := range order {
		out = append(out, registry[k])
	}
	return out
}

// NewSource builds every registered platform's Source from in and returns the Source that
// dispatches each pool to its platform's (KindOf).
func NewSource(in Inputs) (Source, error) {
	sources := map[Kind]Source{}
	for _, k := range Registered() {
		d, _ := Lookup(k)
		s, err := d.NewSource(in)
		if err != nil {
			return nil, fmt.Errorf("%s platform: %w", k, err)
		}
		sources[k] = s
	}
	return Dispatch(sources), nil
}

// Dispatch is a Source that hands each pool to the Source of its platform.
type Dispatch map[Kind]Source

var _ Source = Dispatch(nil)

// For returns the Source of pool's platform, or ErrUnsupported.
func (d Dispatch) For(pool *fleetv1.RunnerPool) (Source, error) {
	kind := KindOf(pool)
	s, ok := d[kind]
	if !ok {
		if kind == "" {
			return nil, fmt.Errorf("%w: spec.platform names no platform", ErrUnsupported)
		}
		return nil, fmt.Errorf("%w: %s (known here: %v)", ErrUnsupported, kind, slices.Sorted(maps.Keys(d)))
	}
	return s, nil
}

// Platform implements Source.
func (d Dispatch) Platform(ctx context.Context, pool *fleetv1.RunnerPool) (Platform, Scope, error) {
	s, err := d.For(pool)
	if err != nil {
		return nil, Scope{}, err
	}
	return s.Platform(ctx, pool)
}

// Installation implements Source.
func (d Dispatch) Installation(ctx context.Context, pool *fleetv1.RunnerPool) (string, error) {
	s, err := d.For(pool)
	if err != nil {
		return "", err
	}
	return s.Installation(ctx, pool)
}

// TokenMatches reports whether a delivery's token header equals secret, in constant time (hashing
// first makes it constant in the length too); an empty token never matches.
func TokenMatches(got string, secret []byte) bool {
	if got == "" {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256(secret)
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
