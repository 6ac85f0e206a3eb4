// Package toyplatform is a CI platform that exists only to prove the platform seam: everything a
// platform brings (its kind, its webhook route, secret setting and early delivery check, its
// metric label, its runner's launch in the agent) is declared here, in its own package, and
// reaches the manager's settings, the webhook receiver, the metrics and the agent through one
// registration line each (pkg/platform/all and pkg/platform/all/launches for a shipped platform;
// the test's init here). The one thing outside its package a real platform adds is its member
// of RunnerPool's spec.platform in the API, which a typed API cannot avoid.
package toyplatform

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	fleetv1 "github.com/hyperfleet-io/hyperfleet/api/hyperfleet/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/launch"
)

// Kind is the toy platform's kind.
const Kind platform.Kind = "toy"

// HeaderToken carries the route's secret on every delivery.
const HeaderToken = "X-Toy-Token"

// Driver registers the toy platform with pkg/platform.
func Driver() platform.Driver {
	return platform.Driver{
		Kind:      Kind,
		NewSource: func(platform.Inputs) (platform.Source, error) { return source{}, nil },
		Webhooks:  parser{},
		WebhookSecret: platform.Setting{Flag: "toy-webhook-secret", Env: "TOY_WEBHOOK_SECRET",
			Usage: "token of the toy platform's webhooks for /webhooks/toy"},
		CheckDelivery: func(header http.Header, secret []byte) (bool, error) {
			if !platform.TokenMatches(header.Get(HeaderToken), secret) {
				return false, fmt.Errorf("%w: %s is missing or wrong", platform.ErrInvalidSignature, HeaderToken)
			}
			return true, nil
		},
	}
}

// Launch starts the toy runner: <dir>/<runScript> --once, its config in the environment.
func Launch(config string, s launch.Setup) (launch.Command, error) {
	if config == "" {
		return launch.Command{}, errors.New("toy runner config is empty")
	}
	return launch.Command{Args: []string{s.Program, "--once", "--name", s.RunnerName}, Env: []string{"TOY_RUNNER_CONFIG=" + config}}, nil
}

// parser answers every delivery whose token checked out with a ping: the toy platform has no
// jobs to route.
type parser struct{}

func (parser) ParseWebhook(header http.Header, _, secret []byte) (platform.Webhook, error) {
	if !platform.TokenMatches(header.Get(HeaderToken), secret) {
		return platform.Webhook{}, platform.ErrInvalidSignature
	}
	return platform.Webhook{Kind: platform.WebhookPing, Event: "ping", DeliveryID: header.Get("X-Toy-Delivery")}, nil
}

// source serves no pool: no RunnerPool can name the toy platform.
type source struct{}

func (source) Platform(context.Context, *fleetv1.RunnerPool) (platform.Platform, platform.Scope, error) {
	return nil, platform.Scope{}, platform.ErrUnsupported
}

func (source) Installation(context.Context, *fleetv1.RunnerPool) (string, error) {
	return "", platform.ErrUnsupported
}
