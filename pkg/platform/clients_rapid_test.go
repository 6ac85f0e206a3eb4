package platform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// clientConfig is everything a pool's client is built from, as the sources key it: the
// credentials Secret's identity and version, the endpoints, the scope and the CA bundle's version.
type clientConfig struct {
	SecretUID, SecretVersion string
	URL, AgentURL            string
	Scope                    Scope
	CAVersion                string
}

func (c clientConfig) key() string {
	return ClientKey(append([]string{c.SecretUID, c.SecretVersion, c.URL, c.AgentURL, c.CAVersion}, ScopeKey(c.Scope)...)...)
}

// builtClient is a client that remembers what it was built from.
type builtClient struct {
	cfg clientConfig
}

// genField draws a short value from an alphabet of separators, so that configurations differing
// only in where one field ends and the next begins are common.
func genField(rt *rapid.T, label string) string {
	return rapid.StringOfN(rapid.SampledFrom([]rune{'a', '|', ':', '1', '/'}), 0, 3, -1).Draw(rt, label)
}

func genConfig(rt *rapid.T, label string) clientConfig {
	c := clientConfig{SecretUID: genField(rt, label+"UID"), SecretVersion: genField(rt, label+"Version"),
		URL: genField(rt, label+"URL"), AgentURL: genField(rt, label+"AgentURL"), CAVersion: genField(rt, label+"CA")}
	path := genField(rt, label+"Path")
	switch rapid.IntRange(0, 2).Draw(rt, label+"Scope") {
	case 0:
		c.Scope = Scope{Repository: path}
	case 1:
		c.Scope = Scope{Organization: path}
	default:
		c.Scope = Scope{Instance: true}
	}
	return c
}

// TestClientCacheNeverServesAnotherConfiguration drives a ClientCache through generated
// sequences of pools asking for clients, Secrets and CA bundles rotated (a new version), pool
// settings changed, pools whose settings differ only in where a field ends or in the kind of
// their scope (a group and a project of one path), builds that fail, and floods of
// configurations past the cache's bound. The
// client returned is always one built for exactly the configuration asked for (credentials,
// endpoints, scope, CA bundle), with its fields full of separators; a failed build is not
// cached; and an unchanged configuration asked for twice in a row gets the same client.
func TestClientCacheNeverServesAnotherConfiguration(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var cache ClientCache[*builtClient]
		configs := []clientConfig{genConfig(rt, "pool0")}
		builds := 0
		get := func(c clientConfig, fail bool) (*builtClient, error) {
			return cache.Get(c.key(), func() (*builtClient, error) {
				builds++
				if fail {
					return nil, errors.New("credentials do not parse")
				}
				return &builtClient{cfg: c}, nil
			})
		}
		check := func(step int, c clientConfig, got *builtClient) {
			if got == nil || got.cfg != c {
				rt.Fatalf("step %d: asked for %+v, got a client built for %+v", step, c, got)
			}
		}
		for step := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			label := fmt.Sprint("step", step)
			i := rapid.IntRange(0, len(configs)-1).Draw(rt, label+"pool")
			switch rapid.IntRange(0, 7).Draw(rt, label+"op") {
			case 0: // another pool
				configs = append(configs, genConfig(rt, label+"new"))
			case 7: // two pools whose settings differ only in where a field ends, or in the scope's kind
				a, b := configs[i], configs[i]
				x, y := genField(rt, label+"x"), genField(rt, label+"y")
				a.URL, a.AgentURL = a.URL+"|"+x, y
				b.AgentURL = x + "|" + y
				c := configs[i]
				if path := c.Scope.Repository + c.Scope.Organization; path != "" {
					c.Scope = Scope{Organization: path}
					if configs[i].Scope.Organization != "" {
						c.Scope = Scope{Repository: path}
					}
				}
				configs = append(configs, a, b, c)
			case 1: // its Secret is rotated
				configs[i].SecretVersion = genField(rt, label+"version")
			case 2: // its CA bundle is rotated, or its settings change
				configs[i].CAVersion = genField(rt, label+"ca")
				configs[i].URL = genField(rt, label+"url")
			case 3: // the build fails, and is not remembered
				before := builds
				if _, err := get(configs[i], true); err == nil && builds > before {
					rt.Fatalf("step %d: a failed build returned no error", step)
				}
				got, err := get(configs[i], false)
				if err != nil {
					rt.Fatalf("step %d: %v", step, err)
				}
				check(step, configs[i], got)
			case 4: // a flood of other configurations past the cache's bound
				for k := range maxCachedClients + 10 {
					c := configs[i]
					c.SecretVersion = fmt.Sprint("flood-", k)
					got, err := get(c, false)
					if err != nil {
						rt.Fatalf("step %d: %v", step, err)
					}
					check(step, c, got)
				}
			default: // the pool asks, twice
				first, err := get(configs[i], false)
				if err != nil {
					rt.Fatalf("step %d: %v", step, err)
				}
				check(step, configs[i], first)
				if again, _ := get(configs[i], false); again != first {
					rt.Fatalf("step %d: an unchanged configuration built a second client", step)
				}
			}
		}
		// Every pool, asked for last, gets its own.
		for i, c := range configs {
			got, err := get(c, false)
			if err != nil {
				rt.Fatalf("pool %d: %v", i, err)
			}
			check(-1, c, got)
		}
	})
}

// TestClientKeyIsInjective: two different lists of parts never make one key, whatever the
// parts contain.
func TestClientKeyIsInjective(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		part := rapid.StringOfN(rapid.SampledFrom([]rune{'a', '|', ':', '1', '0'}), 0, 4, -1)
		a := rapid.SliceOfN(part, 0, 4).Draw(rt, "a")
		b := rapid.SliceOfN(part, 0, 4).Draw(rt, "b")
		if ClientKey(a...) == ClientKey(b...) && !slices.Equal(a, b) {
			rt.Fatalf("%q and %q share the key %q", a, b, ClientKey(a...))
		}
	})
}

// TestProofRemembersOnlyWithinItsLifetimes checks a Proof over generated sequences of checks at
// generated instants (around ProofTTL and RefusalTTL), whose proving succeeds, is refused, fails
// for a while (a 5xx, a rate limit) or is cancelled. Against a model: a success stands for
// ProofTTL and a refusal for RefusalTTL, and no longer; in that time the platform is not asked
// again; a retryable failure or a cancellation is returned but never remembered; a success
// clears a refusal and a refusal a success.
func TestProofRemembersOnlyWithinItsLifetimes(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var p Proof
		now := time.Unix(1_700_000_000, 0)
		var provenAt, refusedAt time.Time
		var refusal error
		for step := range rapid.IntRange(1, 30).Draw(rt, "steps") {
			label := fmt.Sprint("step", step)
			now = now.Add(rapid.SampledFrom([]time.Duration{0, time.Second, 30 * time.Second, RefusalTTL - time.Nanosecond,
				RefusalTTL, ProofTTL - RefusalTTL, ProofTTL - time.Nanosecond, ProofTTL, 2 * ProofTTL}).Draw(rt, label+"wait"))
			var outcome error
			switch rapid.IntRange(0, 3).Draw(rt, label+"outcome") {
			case 1:
				outcome = fmt.Errorf("%w: token refused at step %d", ErrCredentials, step)
			case 2:
				outcome = fmt.Errorf("%w: 502 at step %d", rapid.SampledFrom([]error{ErrTransient, ErrRateLimited}).Draw(rt, label+"retryable"), step)
			case 3:
				outcome = fmt.Errorf("listing runners: %w", context.Canceled)
			}
			asked := false
			err := p.Check(now, func() error {
				asked = true
				return outcome
			})

			var want error
			wantAsked := false
			switch {
			case !provenAt.IsZero() && now.Sub(provenAt) < ProofTTL:
			case refusal != nil && now.Sub(refusedAt) < RefusalTTL:
				want = refusal
			default:
				wantAsked, want = true, outcome
				switch {
				case outcome == nil:
					provenAt, refusal = now, nil
				case errors.Is(outcome, ErrCredentials):
					provenAt, refusal, refusedAt = time.Time{}, outcome, now
				}
			}
			if asked != wantAsked || !errors.Is(err, want) || (err == nil) != (want == nil) {
				rt.Fatalf("step %d at +%s: asked %v, got %v; want asked %v, %v", step, now.Sub(time.Unix(1_700_000_000, 0)), asked, err, wantAsked, want)
			}
		}
	})
}
