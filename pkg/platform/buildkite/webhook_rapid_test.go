package buildkite_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	bk "github.com/buildkite/go-buildkite/v4"
	"pgregory.net/rapid"

	"github.com/hyperfleet-io/hyperfleet/pkg/platform"
	"github.com/hyperfleet-io/hyperfleet/pkg/platform/buildkite"
	"github.com/hyperfleet-io/hyperfleet/test/rapidgen"
)

// goBuildkiteAccepts is go-buildkite's own verdict on a delivery (it checks no freshness). Its
// parser indexes header parts without checking them, so a panic counts as a refusal.
func goBuildkiteAccepts(header http.Header, body, token []byte) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	req := httptest.NewRequest(http.MethodPost, "/webhooks/buildkite", bytes.NewReader(body))
	req.Header = header
	_, err := bk.ValidatePayload(req, token)
	return err == nil
}

// TestSignatureAcceptsExactlyTheSignedDelivery signs generated bodies with generated tokens at
// generated times, within and outside the freshness window, and delivers them unchanged or with
// the body, the X-Buildkite-Signature header or the token changed. A genuine delivery is
// accepted exactly when it was signed within MaxSignatureAge of now (either side); whatever the
// change, a delivery is accepted only when its body is the signed body and its header carries
// the signed timestamp and that "<timestamp>.<body>"'s HMAC under the token, and go-buildkite's
// ValidatePayload agrees with every acceptance. Every refusal is ErrInvalidSignature.
func TestSignatureAcceptsExactlyTheSignedDelivery(t *testing.T) {
	now := time.Unix(1_750_000_000, 0)
	rapid.Check(t, func(rt *rapid.T) {
		token := rapid.SliceOfN(rapid.Byte(), 1, 64).Draw(rt, "token")
		body := rapid.SliceOfN(rapid.Byte(), 0, 512).Draw(rt, "body")
		skew := time.Duration(rapid.IntRange(-900, 900).Draw(rt, "skewSeconds")) * time.Second
		ts := strconv.FormatInt(now.Add(-skew).Unix(), 10)
		mac := hmac.New(sha256.New, token)
		mac.Write([]byte(ts + "." + string(body)))
		sum := mac.Sum(nil)
		signed := fmt.Sprintf("timestamp=%s,signature=%s", ts, hex.EncodeToString(sum))
		fresh := skew <= buildkite.MaxSignatureAge && skew >= -buildkite.MaxSignatureAge

		header := func(v string) http.Header {
			h := http.Header{}
			h.Set(buildkite.HeaderSignature, v)
			return h
		}
		if err := buildkite.Verify(header(signed), body, token, now); (err == nil) != fresh {
			rt.Fatalf("genuine delivery signed %s ago: fresh %v, verify said %v", skew, fresh, err)
		}

		gotBody, gotHeader, gotToken := body, signed, token
		switch rapid.IntRange(0, 2).Draw(rt, "change") {
		case 0:
			gotBody = rapidgen.Mutate(rt, "body", body, 120)
		case 1:
			gotHeader = string(rapidgen.Mutate(rt, "header", []byte(signed), 120))
		case 2:
			gotToken = rapidgen.Mutate(rt, "token", token, 120)
		}
		if gotHeader == "" {
			gotHeader = "," // an empty header would fall back to X-Buildkite-Token, which is absent anyway
		}
		err := buildkite.Verify(header(gotHeader), gotBody, gotToken, now)
		if err != nil {
			if !errors.Is(err, platform.ErrInvalidSignature) {
				rt.Fatalf("refusal is not ErrInvalidSignature: %v", err)
			}
			return
		}
		// Read the header back, allowing only what the format allows: blanks around its parts.
		fields := map[string]string{}
		parts := strings.Split(gotHeader, ",")
		for i, part := range parts {
			parts[i] = strings.TrimSpace(part)
			k, v, _ := strings.Cut(parts[i], "=")
			fields[k] = v
		}
		gotMAC, _ := hex.DecodeString(fields["signature"])
		switch {
		case !fresh:
			rt.Fatalf("a delivery signed %s ago was accepted after the change", skew)
		case !bytes.Equal(gotBody, body):
			rt.Fatalf("a changed body was accepted: %q for %q", gotBody, body)
		case len(parts) != 2 || fields["timestamp"] != ts || !hmac.Equal(gotMAC, sum):
			rt.Fatalf("header %q accepted, which is not the signed timestamp %s and its HMAC", gotHeader, ts)
		case !bytes.Equal(bytes.TrimRight(gotToken, "\x00"), bytes.TrimRight(token, "\x00")):
			// HMAC pads a short key with zeros: "k" and "k\x00" are one key.
			rt.Fatalf("a signature made with another token was accepted (%q, signed with %q)", gotToken, token)
		case !goBuildkiteAccepts(header(strings.Join(parts, ",")), gotBody, gotToken):
			// go-buildkite takes no blanks around the parts; net/http strips them at the ends anyway.
			rt.Fatalf("accepted a delivery go-buildkite refuses: %q", gotHeader)
		}
	})
}
