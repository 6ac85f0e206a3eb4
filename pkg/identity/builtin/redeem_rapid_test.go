package builtin_test

import (
	"context"
	"crypto"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/hyperfleet-io/hyperfleet/api"
	bootstrapv1 "github.com/hyperfleet-io/hyperfleet/api/bootstrap/v1alpha1"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
	"github.com/hyperfleet-io/hyperfleet/pkg/identity/builtin"
)

// redemption is one caller's attempt and what it got.
type redemption struct {
	genuine bool // presented the token the VM was given
	csr     *x509.CertificateRequest
	got     *identity.Attested
	err     error
}

// TestJoinTokenIsRedeemedAtMostOnce redeems one Machine's join token under generated
// interleavings: several callers presenting it at once (a VM retrying, an attacker who copied
// it), forged tokens for the same BootstrapConfig among them, and replays once the race is
// over, against a token that may have expired. The client is controller-runtime's fake, which
// enforces resourceVersion as the API server does. Exactly one genuine caller is issued an
// SVID if the token is fresh, none otherwise; it is the Machine's SPIFFE ID over that caller's
// own key; every other genuine attempt is ErrAlreadyRedeemed (or ErrExpired), every forged one
// ErrInvalidEvidence; and the BootstrapConfig records the redemption exactly when one happened.
func TestJoinTokenIsRedeemedAtMostOnce(t *testing.T) {
	td := spiffeid.RequireTrustDomainFromString("hyperfleet.test")
	ca, _, _, err := identity.NewCA(td, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Keys are slow to make: a few, shared by the callers of every run.
	var csrs []*x509.CertificateRequest
	for range 4 {
		_, csrPEM, err := identity.NewKeyAndCSR()
		if err != nil {
			t.Fatal(err)
		}
		csr, err := identity.ParseCSRPEM(csrPEM)
		if err != nil {
			t.Fatal(err)
		}
		csrs = append(csrs, csr)
	}
	now := time.Unix(1_750_000_000, 0)
	wantID, err := identity.MachineID(td, "ns", "runner-1")
	if err != nil {
		t.Fatal(err)
	}

	rapid.Check(t, func(rt *rapid.T) {
		ctx := context.Background()
		machine := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "runner-1", Namespace: "ns", UID: "machine-uid"},
			Spec: clusterv1.MachineSpec{ClusterName: "runners"}}
		token, err := identity.NewJoinToken(identity.JoinTokenRef{Namespace: "ns", Name: "runner-1"})
		if err != nil {
			rt.Fatal(err)
		}
		fresh := rapid.IntRange(0, 4).Draw(rt, "expired") > 0
		expires := now.Add(time.Hour)
		if !fresh {
			expires = now.Add(-time.Duration(rapid.IntRange(0, 3600).Draw(rt, "expiredFor")) * time.Second)
		}
		bc := &bootstrapv1.BootstrapConfig{ObjectMeta: metav1.ObjectMeta{Name: "runner-1", Namespace: "ns",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine",
				Name: machine.Name, UID: machine.UID, Controller: ptr.To(true)}}},
			Status: bootstrapv1.BootstrapConfigStatus{SPIFFEID: wantID.String(), TokenExpirationTime: ptr.To(metav1.NewTime(expires)),
				JoinToken: &bootstrapv1.JoinTokenStatus{SHA256: identity.HashJoinToken(token)}}}
		c := fake.NewClientBuilder().WithScheme(api.NewScheme()).WithObjects(machine, bc).
			WithStatusSubresource(&bootstrapv1.BootstrapConfig{}).Build()
		a := &builtin.Attestor{Client: c, CA: ca, Now: func() time.Time { return now }}

		forged := func(label string) string {
			switch rapid.IntRange(0, 2).Draw(rt, label) {
			case 0: // another token minted for the same config (a stale one, or a guess)
				other, err := identity.NewJoinToken(identity.JoinTokenRef{Namespace: "ns", Name: "runner-1"})
				if err != nil {
					rt.Fatal(err)
				}
				return other
			case 1: // one hex digit changed
				b := []byte(token)
				i := len(b) - 1 - rapid.IntRange(0, 63).Draw(rt, label+"At")
				const digits = "0123456789abcdef"
				b[i] = digits[(strings.IndexByte(digits, b[i])+rapid.IntRange(1, 15).Draw(rt, label+"By"))%16]
				return string(b)
			default: // cut short
				return token[:len(token)-1-rapid.IntRange(0, 63).Draw(rt, label+"Cut")]
			}
		}
		redeem := func(r *redemption, tok string) {
			r.got, r.err = a.Attest(ctx, identity.Evidence{JoinToken: tok, CSR: r.csr})
		}

		// The race: genuine and forged callers at once.
		var racers []*redemption
		var tokens []string
		for i := range rapid.IntRange(1, 8).Draw(rt, "racers") {
			r := &redemption{genuine: rapid.IntRange(0, 3).Draw(rt, fmt.Sprint("genuine", i)) > 0,
				csr: csrs[rapid.IntRange(0, len(csrs)-1).Draw(rt, fmt.Sprint("key", i))]}
			tok := token
			if !r.genuine {
				tok = forged(fmt.Sprint("forged", i))
			}
			racers, tokens = append(racers, r), append(tokens, tok)
		}
		var wg sync.WaitGroup
		for i, r := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				redeem(r, tokens[i])
			}()
		}
		wg.Wait()
		// Replays after the race, genuine or not.
		all := racers
		for i := range rapid.IntRange(0, 3).Draw(rt, "replays") {
			r := &redemption{genuine: rapid.Bool().Draw(rt, fmt.Sprint("replayGenuine", i)), csr: csrs[0]}
			tok := token
			if !r.genuine {
				tok = forged(fmt.Sprint("replayForged", i))
			}
			redeem(r, tok)
			all = append(all, r)
		}

		issued, genuine := 0, 0
		for _, r := range all {
			if r.genuine {
				genuine++
			}
			switch {
			case r.err == nil && !r.genuine:
				rt.Fatalf("a forged token was redeemed")
			case r.err == nil:
				issued++
				leaf := r.got.Chain[0]
				if r.got.ID != wantID || len(leaf.URIs) != 1 || leaf.URIs[0].String() != wantID.String() {
					rt.Fatalf("issued %v (SVID %v), want %s", r.got.ID, leaf.URIs, wantID)
				}
				if !leaf.PublicKey.(interface{ Equal(crypto.PublicKey) bool }).Equal(r.csr.PublicKey) {
					rt.Fatalf("the SVID is not over the redeeming caller's key")
				}
			case !r.genuine && !errors.Is(r.err, identity.ErrInvalidEvidence):
				rt.Fatalf("forged token refused as %v, want ErrInvalidEvidence", r.err)
			case r.genuine && fresh && !errors.Is(r.err, identity.ErrAlreadyRedeemed):
				rt.Fatalf("genuine attempt after the redemption refused as %v, want ErrAlreadyRedeemed", r.err)
			case r.genuine && !fresh && !errors.Is(r.err, identity.ErrExpired):
				rt.Fatalf("expired token refused as %v, want ErrExpired", r.err)
			}
		}
		want := 0
		if fresh && genuine > 0 {
			want = 1
		}
		if issued != want {
			rt.Fatalf("%d SVIDs issued for one join token (%d genuine attempts, fresh %v), want %d", issued, genuine, fresh, want)
		}
		stored := &bootstrapv1.BootstrapConfig{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(bc), stored); err != nil {
			rt.Fatal(err)
		}
		if redeemed := stored.Status.JoinToken.RedeemedTime != nil; redeemed != (issued == 1) {
			rt.Fatalf("BootstrapConfig says redeemed %v after %d redemptions", redeemed, issued)
		}
	})
}
