package connection

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultSecretTTL is how long a Registry reuses a credentials or CA Secret it read. The manager
// does not cache Secrets (it watches none, so a tenant's Secrets are read only where a
// HypervisorCluster names them): without this every reconcile of every MachineClaim read two
// Secrets from the API server, about a hundred reads per runner VM in a burst. A rotated or
// deleted Secret, or a namespace no longer enabled, takes effect within this time.
const DefaultSecretTTL = 10 * time.Second

// secretReader reads Secrets through reader, reusing each for ttl. Only successful reads are kept:
// a missing or forbidden Secret is asked for again every time.
type secretReader struct {
	reader client.Reader
	ttl    time.Duration
	now    func() time.Time

	mu   sync.Mutex
	read map[client.ObjectKey]readSecret
}

type readSecret struct {
	secret *corev1.Secret
	at     time.Time
}

func newSecretReader(reader client.Reader, ttl time.Duration) *secretReader {
	return &secretReader{reader: reader, ttl: ttl, now: time.Now, read: map[client.ObjectKey]readSecret{}}
}

// Get reads the Secret key names into secret.
func (r *secretReader) Get(ctx context.Context, key client.ObjectKey, secret *corev1.Secret) error {
	if r.ttl <= 0 {
		return r.reader.Get(ctx, key, secret)
	}
	r.mu.Lock()
	e, ok := r.read[key]
	r.mu.Unlock()
	if ok && r.now().Sub(e.at) < r.ttl {
		e.secret.DeepCopyInto(secret)
		return nil
	}
	at := r.now()
	if err := r.reader.Get(ctx, key, secret); err != nil {
		r.mu.Lock()
		delete(r.read, key)
		r.mu.Unlock()
		return err
	}
	r.mu.Lock()
	r.read[key] = readSecret{secret: secret.DeepCopy(), at: at}
	r.mu.Unlock()
	return nil
}
