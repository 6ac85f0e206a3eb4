package bootstrapconfig

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// dataSecretRecheck is how often a BootstrapConfig whose data Secret was handed out checks that
// the Secret is still in place.
const dataSecretRecheck = time.Minute

// secretChecks remembers, per BootstrapConfig, when its data Secret was last seen in place. The
// manager caches no Secrets, so each check is a read from the API server, and Cluster API's
// Machine writes wake a config dozens of times in its life: in a 1,000-job burst these reads were
// the API server's most frequent request (54 per VM). Memory only: a restarted manager checks once
// more at once.
type secretChecks struct {
	mu sync.Mutex
	at map[types.UID]secretSeen
}

// secretSeen is when a data Secret was seen in place, and the join token hash the config had.
type secretSeen struct {
	at   time.Time
	hash string
}

// recent reports whether uid's Secret was seen in place less than dataSecretRecheck ago while the
// config recorded the token hash it records now.
func (s *secretChecks) recent(uid types.UID, hash string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.at[uid]
	return ok && e.hash == hash && now.Sub(e.at) < dataSecretRecheck && !now.Before(e.at)
}

// saw records that uid's Secret was in place at now, with the config recording hash.
func (s *secretChecks) saw(uid types.UID, hash string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.at == nil {
		s.at = map[types.UID]secretSeen{}
	}
	if len(s.at) >= 1024 { // configs deleted since do not linger
		for k, e := range s.at {
			if now.Sub(e.at) >= dataSecretRecheck {
				delete(s.at, k)
			}
		}
	}
	s.at[uid] = secretSeen{at: now, hash: hash}
}

// forget drops uid, so its next reconcile reads the Secret.
func (s *secretChecks) forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.at, uid)
}
