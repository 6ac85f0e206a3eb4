package hypervisor

import "sync"

// Cache keeps one Provider per hypervisor cluster (keyed by the HypervisorCluster's namespace/name)
// and rebuilds it when the hash of its configuration, credentials included, changes. Concurrent
// callers for one key share a single build; a failed build is not cached.
type Cache struct {
	mu      sync.Mutex
	entries map[string]*cacheEntry
}

type cacheEntry struct {
	hash     string
	done     chan struct{}
	provider Provider
	err      error
}

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{entries: map[string]*cacheEntry{}} }

// Get returns the cached Provider for key when it was built from cfgHash, and otherwise builds,
// caches and returns a new one. A replaced Provider is closed if it has a Close method.
func (c *Cache) Get(key, cfgHash string, build func() (Provider, error)) (Provider, error) {
	for {
		c.mu.Lock()
		e, ok := c.entries[key]
		if ok && e.hash == cfgHash {
			c.mu.Unlock()
			<-e.done
			if e.err == nil {
				return e.provider, nil
			}
			// The build this caller waited for failed; drop it (if still there) and try again.
			c.mu.Lock()
			if c.entries[key] == e {
				delete(c.entries, key)
				c.mu.Unlock()
				return nil, e.err
			}
			c.mu.Unlock()
			continue
		}
		fresh := &cacheEntry{hash: cfgHash, done: make(chan struct{})}
		c.entries[key] = fresh
		c.mu.Unlock()
		if ok {
			go closeWhenBuilt(e)
		}
		fresh.provider, fresh.err = build()
		close(fresh.done)
		if fresh.err != nil {
			c.mu.Lock()
			if c.entries[key] == fresh {
				delete(c.entries, key)
			}
			c.mu.Unlock()
		}
		return fresh.provider, fresh.err
	}
}

// Delete drops and closes the Provider cached for key, e.g. when its HypervisorCluster is deleted.
func (c *Cache) Delete(key string) {
	c.mu.Lock()
	e, ok := c.entries[key]
	delete(c.entries, key)
	c.mu.Unlock()
	if ok {
		go closeWhenBuilt(e)
	}
}

// Len is the number of cached providers.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

// closeWhenBuilt closes a replaced provider once its build ends. Callers that already hold it
// may still be using it; closing only drops idle connections, so their calls still complete.
func closeWhenBuilt(e *cacheEntry) {
	<-e.done
	if closer, ok := e.provider.(interface{ Close() }); ok && e.err == nil {
		closer.Close()
	}
}
