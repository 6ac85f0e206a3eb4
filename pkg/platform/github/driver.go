package github

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
)

// Driver is GitHub's registration with pkg/platform: PoolClients built from the process's
// inputs, and the workflow_job parser of /webhooks/github.
func Driver() platform.Driver {
	return platform.Driver{
		Kind: platform.KindGitHub,
		NewSource: func(in platform.Inputs) (platform.Source, error) {
			return &PoolClients{Reader: in.Reader, Transport: in.Transport, HTTPTimeout: in.HTTPTimeout}, nil
		},
		Webhooks: webhookParser{},
		WebhookSecret: platform.Setting{Flag: "webhook-secret", Env: "GITHUB_WEBHOOK_SECRET",
			Usage: "GitHub App webhook secret for /webhooks/github (prefer the environment variable from a Secret); the route refuses every delivery without it"},
		CheckDelivery: checkDelivery,
		NewPollers: func(in platform.Inputs, feed platform.DemandFeed) (platform.Pollers, error) {
			return &PollSet{Reader: in.Reader, Feed: feed,
				Clients: &PoolClients{Reader: in.Reader, Transport: in.Transport, HTTPTimeout: in.HTTPTimeout}}, nil
		},
	}
}

// checkDelivery: the HMAC covers the body, so only its shape can be checked before the body
// arrives; a request without it (or with only the SHA-1 header) is refused at once.
func checkDelivery(header http.Header, _ []byte) (bool, error) {
	hexSig, ok := strings.CutPrefix(header.Get(HeaderSignatureSHA256), "sha256=")
	if !ok {
		return false, fmt.Errorf("%w: no %s", platform.ErrInvalidSignature, HeaderSignatureSHA256)
	}
	if sig, err := hex.DecodeString(hexSig); err != nil || len(sig) != sha256.Size {
		return false, fmt.Errorf("%w: %s is not sha256=<64 hex digits>", platform.ErrInvalidSignature, HeaderSignatureSHA256)
	}
	return false, nil
}
