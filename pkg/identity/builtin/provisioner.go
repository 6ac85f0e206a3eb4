package builtin

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/hyperfleet-io/hyperfleet/pkg/identity"
)

// Provisioner mints builtin join tokens. It reads (or creates) the shared CA only to hand VMs its
// certificate; it never signs anything itself.
type Provisioner struct {
	client      client.Client
	caKey       types.NamespacedName
	trustDomain spiffeid.TrustDomain
	now         func() time.Time

	mu sync.Mutex
	ca *identity.CA
}

var _ identity.Provisioner = (*Provisioner)(nil)

// NewProvisioner serves trustDomain with the CA in the Secret caKey.
func NewProvisioner(c client.Client, caKey types.NamespacedName, trustDomain spiffeid.TrustDomain) *Provisioner {
	return &Provisioner{client: c, caKey: caKey, trustDomain: trustDomain, now: time.Now}
}

// TrustDomain is the one trust domain this provisioner serves.
func (p *Provisioner) TrustDomain() spiffeid.TrustDomain { return p.trustDomain }

// Provision returns a new join token for m's BootstrapConfig and the hash to store for it.
func (p *Provisioner) Provision(_ context.Context, td spiffeid.TrustDomain, m identity.Machine, ttl time.Duration) (identity.Credential, error) {
	if td != p.trustDomain {
		return identity.Credential{}, fmt.Errorf("trust domain %s is not served here (the builtin CA serves %s)", td, p.trustDomain)
	}
	id, err := identity.MachineID(td, m.Namespace, m.Name)
	if err != nil {
		return identity.Credential{}, err
	}
	token, err := identity.NewJoinToken(identity.JoinTokenRef{Namespace: m.Namespace, Name: m.BootstrapConfig})
	if err != nil {
		return identity.Credential{}, err
	}
	return identity.Credential{ID: id, JoinToken: token, ExpiresAt: p.now().Add(ttl), TokenHash: identity.HashJoinToken(token)}, nil
}

// TrustBundlePEM returns the shared CA's certificate, creating the CA if no replica has yet.
func (p *Provisioner) TrustBundlePEM(ctx context.Context) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ca == nil {
		ca, err := LoadOrCreateCA(ctx, p.client, p.caKey, p.trustDomain)
		if err != nil {
			return nil, err
		}
		p.ca = ca
	}
	return p.ca.BundlePEM(), nil
}
