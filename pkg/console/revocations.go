package console

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Reading and writing the list of signed-out sessions.
const (
	// revocationsRefresh is how often a replica reads the list again: a session signed out at
	// another replica is refused here at most this long after.
	revocationsRefresh = 5 * time.Second
	// revocationsStale is how long a replica goes on with its last list while the API server does
	// not answer; after that it refuses sessions (503) rather than trust a list it cannot read.
	revocationsStale = time.Minute
	// revocationsTimeout bounds one read or write of the list.
	revocationsTimeout = 5 * time.Second
	// maxRevocations keeps the ConfigMap far below the API server's 1 MiB object limit (an entry
	// is about 70 bytes); entries leave it when their session would have expired.
	maxRevocations = 10000
)

var (
	// errRevocationsUnavailable: the list of signed-out sessions could not be read for a while, so
	// no session is trusted (503).
	errRevocationsUnavailable = errors.New("the console cannot read its list of signed-out sessions: try again shortly")
	// errRevocationsFull: the list holds maxRevocations sessions that have not expired yet.
	errRevocationsFull = fmt.Errorf("the list of signed-out sessions holds %d sessions that have not expired yet", maxRevocations)
)

// revocations lists sessions that were signed out before their cookie expires. A session lives in
// a sealed cookie and the console keeps none, so without this list a copy of the cookie would work
// until it expires (up to 12 hours) after its owner signed out. The list is a ConfigMap in the
// console's own namespace, session ID to expiry, so every replica refuses a signed-out session;
// sign-outs write it with the resourceVersion they read, so two replicas never lose each other's.
type revocations struct {
	client client.Client
	key    client.ObjectKey

	mu      sync.Mutex
	revoked map[string]time.Time
	// readAt is the last successful read, triedAt the last attempt.
	readAt, triedAt time.Time
}

func newRevocations(c client.Client, key client.ObjectKey) *revocations {
	return &revocations{client: c, key: key, revoked: map[string]time.Time{}}
}

// isRevoked says whether the session id was signed out, reading the list again when the copy in
// memory is older than revocationsRefresh.
func (r *revocations) isRevoked(ctx context.Context, id string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if now.Sub(r.triedAt) >= revocationsRefresh {
		r.triedAt = now
		ctx, cancel := context.WithTimeout(ctx, revocationsTimeout)
		defer cancel()
		cm, err := r.get(ctx)
		switch {
		case err == nil:
			r.revoked, r.readAt = parseRevocations(cm), now
		case now.Sub(r.readAt) > revocationsStale:
			return false, fmt.Errorf("%w (%v)", errRevocationsUnavailable, err)
		}
	}
	_, revoked := r.revoked[id]
	return revoked, nil
}

// revoke adds the session id, valid until expires, to the list, and drops sessions that have
// expired by now.
func (r *revocations) revoke(ctx context.Context, id string, expires time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, revocationsTimeout)
	defer cancel()
	var cm *corev1.ConfigMap
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		if cm, err = r.get(ctx); err != nil {
			return err
		}
		if cm.ResourceVersion == "" {
			return fmt.Errorf("ConfigMap %s, the list of signed-out sessions, does not exist: it is part of the console's install", r.key)
		}
		now := time.Now()
		for k, v := range cm.Data {
			if t, err := time.Parse(time.RFC3339, v); err != nil || !now.Before(t) {
				delete(cm.Data, k)
			}
		}
		if len(cm.Data) >= maxRevocations {
			return errRevocationsFull
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[id] = expires.UTC().Format(time.RFC3339)
		// Update sends the resourceVersion read above: a sign-out another replica wrote in
		// between is a conflict, and this one is tried again on the newer list.
		return r.client.Update(ctx, cm)
	})
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.revoked, r.readAt, r.triedAt = parseRevocations(cm), time.Now(), time.Now()
	return nil
}

// get reads the ConfigMap; a missing one is an empty list (nothing was revoked through it).
func (r *revocations) get(ctx context.Context) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := r.client.Get(ctx, r.key, cm)
	if apierrors.IsNotFound(err) {
		return &corev1.ConfigMap{}, nil
	}
	return cm, err
}

// parseRevocations reads the list. An entry whose expiry does not parse stays revoked (until a
// sign-out drops it), rather than let a session through.
func parseRevocations(cm *corev1.ConfigMap) map[string]time.Time {
	out := make(map[string]time.Time, len(cm.Data))
	for id, v := range cm.Data {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			t = time.Now().Add(maxSession)
		}
		out[id] = t
	}
	return out
}
