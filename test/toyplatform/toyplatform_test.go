package toyplatform_test

import (
	"flag"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hyperfleet-io/hyperfleet/pkg/config"
	"github.com/hyperfleet-io/hyperfleet/pkg/metrics"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/launch"
	"github.com/hyperfleet-io/hyperfleet/pkg/webhook"
	"github.com/hyperfleet-io/hyperfleet/test/toyplatform"
)

// The registration lines: pkg/platform/all and pkg/platform/all/launches hold these for the
// platforms HyperFleet ships.
func init() {
	platform.Register(toyplatform.Driver())
	launch.Register(string(toyplatform.Kind), toyplatform.Launch)
}

// TestAToyPlatformReachesEverySeam: registered, the toy platform is a known kind, its webhook
// secret is a manager setting (flag and environment variable), the receiver serves its route
// and refuses a delivery without its token before reading the body, its metrics carry its own
// label, and the agent can start its runner; none of those packages names it.
func TestAToyPlatformReachesEverySeam(t *testing.T) {
	if !toyplatform.Kind.Valid() || !contains(platform.Kinds(), toyplatform.Kind) {
		t.Fatalf("the toy kind is not known: %v", platform.Kinds())
	}

	m := &config.Manager{}
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	check := m.Bind(fs, func(k string) string {
		return map[string]string{"TOY_WEBHOOK_SECRET": "from-env"}[k]
	})
	if err := fs.Parse([]string{"--toy-webhook-secret=toy-token"}); err != nil {
		t.Fatal(err)
	}
	if err := check(); err != nil {
		t.Fatal(err)
	}
	if got := m.WebhookSecrets[toyplatform.Kind]; got != "toy-token" {
		t.Fatalf("the toy platform's secret setting: %q", got)
	}

	r := webhook.NewReceiver(nil, nil, webhook.Config{Secrets: map[platform.Kind][]byte{toyplatform.Kind: []byte(m.WebhookSecrets[toyplatform.Kind])}}, nil)
	deliver := func(token string) int {
		req := httptest.NewRequest(http.MethodPost, webhook.PathPrefix+"toy", strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set(toyplatform.HeaderToken, token)
		}
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := deliver(""); code != http.StatusUnauthorized {
		t.Errorf("a delivery without the token: %d, want 401", code)
	}
	if code := deliver("wrong"); code != http.StatusUnauthorized {
		t.Errorf("a delivery with a wrong token: %d, want 401", code)
	}
	if code := deliver("toy-token"); code >= 300 {
		t.Errorf("a delivery with the token: %d", code)
	}

	before := testutil.ToFloat64(metrics.PlatformRateLimited.WithLabelValues("toy"))
	metrics.PlatformRateLimit("toy")
	if got := testutil.ToFloat64(metrics.PlatformRateLimited.WithLabelValues("toy")); got != before+1 {
		t.Errorf("the toy platform's metrics are not labelled toy: %v", got)
	}

	build, ok := launch.For(string(toyplatform.Kind))
	if !ok {
		t.Fatalf("the agent cannot start a toy runner: %v", launch.Kinds())
	}
	cmd, err := build("cfg", launch.Setup{Directory: "/opt/toy", Program: "/opt/toy/run", RunnerName: "hf-1"})
	if err != nil || strings.Join(cmd.Args, " ") != "/opt/toy/run --once --name hf-1" || cmd.Env[0] != "TOY_RUNNER_CONFIG=cfg" {
		t.Errorf("toy launch: %+v, %v", cmd, err)
	}
}

func contains(kinds []platform.Kind, k platform.Kind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}
