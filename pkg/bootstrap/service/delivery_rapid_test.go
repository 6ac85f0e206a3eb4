package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hyperfleet-io/hyperfleet/api"
	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
)

// TestRunnerConfigIsIssuedAtMostOnce runs generated interleavings of one VM's runner-config
// requests (retries, a copied SVID, replays after the fact) through the claim that guards the
// one-time config, each request's platform registration failing or not, on controller-runtime's
// fake client, which enforces resourceVersion as the API server does. A claim whose registration
// failed is given back, so a retry may succeed. Whatever the interleaving: no two requests hold
// the claim at once, at most one config is handed out, every request after it is refused with
// 409, and the BootstrapConfig records the issue exactly when one happened.
func TestRunnerConfigIsIssuedAtMostOnce(t *testing.T) {
	id := spiffeid.RequireFromString("spiffe://hyperfleet.test/ns/ns/machine/runner-1")
	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		bc := &bootstrapv1.BootstrapConfig{ObjectMeta: metav1.ObjectMeta{Name: "runner-1", Namespace: "ns"},
			Status: bootstrapv1.BootstrapConfigStatus{SPIFFEID: id.String()}}
		c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(bc).
			WithStatusSubresource(&bootstrapv1.BootstrapConfig{}).Build()
		s := &Server{opts: Options{Client: c, Now: time.Now, APITimeout: 5 * time.Second}, log: logr.Discard()}

		var holding, maxHolding, issued atomic.Int32
		request := func(registers bool) error {
			cfg := &bootstrapv1.BootstrapConfig{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(bc), cfg); err != nil {
				return err
			}
			tg := &target{id: id, config: cfg}
			if err := s.claimRunnerConfig(ctx, tg); err != nil {
				return err
			}
			n := holding.Add(1)
			for m := maxHolding.Load(); n > m && !maxHolding.CompareAndSwap(m, n); m = maxHolding.Load() {
			}
			if !registers { // the platform refused: give the claim back
				// No longer held from the moment the release may land: another request may take
				// the claim as soon as it has.
				holding.Add(-1)
				s.releaseRunnerConfig(ctx, tg, errors.New("registration failed"))
				return errPlatform
			}
			defer holding.Add(-1)
			issued.Add(1)
			return s.recordAttested(ctx, tg)
		}

		var afterIssue []error
		for round := range rapid.IntRange(1, 4).Draw(rt, "rounds") {
			n := rapid.IntRange(1, 6).Draw(rt, fmt.Sprint("requests", round))
			registers := make([]bool, n)
			for i := range registers {
				registers[i] = rapid.IntRange(0, 2).Draw(rt, fmt.Sprintf("registers%d_%d", round, i)) > 0
			}
			before := issued.Load()
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = request(registers[i])
				}()
			}
			wg.Wait()
			if before > 0 {
				afterIssue = append(afterIssue, errs...)
			}
			for _, err := range errs {
				if err != nil && !errors.Is(err, errPlatform) && statusOf(err) != http.StatusConflict {
					rt.Fatalf("round %d: request failed with %v, want a 409 or the platform's refusal", round, err)
				}
			}
		}

		if got := maxHolding.Load(); got > 1 {
			rt.Fatalf("%d requests held the runner-config claim at once", got)
		}
		if got := issued.Load(); got > 1 {
			rt.Fatalf("the one-time runner config was handed out %d times", got)
		}
		for _, err := range afterIssue {
			if statusOf(err) != http.StatusConflict {
				rt.Fatalf("a request after the config was issued got %v, want 409", err)
			}
		}
		stored := &bootstrapv1.BootstrapConfig{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(bc), stored); err != nil {
			rt.Fatal(err)
		}
		if recorded := stored.Status.RunnerConfigTime != nil && stored.Status.AttestedTime != nil; recorded != (issued.Load() == 1) {
			rt.Fatalf("BootstrapConfig records an issue: %v, after %d issues (%+v)", recorded, issued.Load(), stored.Status)
		}
	})
}

var errPlatform = errors.New("the platform refused the registration")

// statusOf is the HTTP status a refusal carries, 0 for any other error.
func statusOf(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.code
	}
	return 0
}
