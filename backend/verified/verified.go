// Package verified remembers tokens that passed a full signature check, by the SHA-256 of their
// exact bytes, so that the same token presented again (an agent sends one identity JWT and one
// delegation token with every call of the hour) is not verified again. Only what a caller stored
// after a full check is returned, never past the time it gave; every rule that can change in
// between (expiry, a key rotated or refreshed, the grant) stays the caller's to apply on a hit
// (docs/wire.md, "The identity JWT" and "The delegation token").
package verified

import (
	"crypto/sha256"
	"sync"
	"time"
)

// Cache holds at most max tokens; when full, an arbitrary one makes room. It is safe for
// concurrent use.
type Cache[T any] struct {
	mu  sync.Mutex
	max int
	m   map[[sha256.Size]byte]entry[T]
}

type entry[T any] struct {
	v     T
	until time.Time
}

// New returns a cache of at most max tokens.
func New[T any](max int) *Cache[T] {
	return &Cache[T]{max: max, m: make(map[[sha256.Size]byte]entry[T])}
}

// Get returns what Put stored for token, unless now is past the time Put gave.
func (c *Cache[T]) Get(token string, now time.Time) (T, bool) {
	k := sha256.Sum256([]byte(token))
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if ok && now.After(e.until) {
		delete(c.m, k)
		ok = false
	}
	return e.v, ok
}

// Put remembers v for token until the given time.
func (c *Cache[T]) Put(token string, v T, until time.Time) {
	k := sha256.Sum256([]byte(token))
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = entry[T]{v: v, until: until}
}
