// Package limit provides the node's flood limits: token buckets and concurrency slots kept per
// key (an agent, an issuer's site, a client address) in bounded memory. The limits themselves,
// their values and keys, are in docs/wire.md ("Limits") and docs/threats.md (F).
package limit

import (
	"sync"
	"time"
)

// maxKeys bounds the memory of Buckets: past it, idle (full) buckets are dropped, and if none
// is idle, every bucket is: a flood of keys can reset its own counts, never block a key it
// does not hold.
const maxKeys = 10000

// Buckets is a token bucket per key: Burst tokens to start, one more every Every.
type Buckets struct {
	mu    sync.Mutex
	burst float64
	every time.Duration
	m     map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// NewBuckets makes buckets of burst tokens refilled one per every.
func NewBuckets(burst int, every time.Duration) *Buckets {
	return &Buckets{burst: float64(burst), every: every, m: map[string]*bucket{}}
}

// Take spends one of key's tokens. When there is none it spends nothing and says how long
// until there is one.
func (b *Buckets) Take(key string, now time.Time) (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.get(key, now)
	if k.tokens < 1 {
		return false, b.until(k)
	}
	k.tokens--
	return true, 0
}

// Wait is how long until key has a token (0: it has one now), spending nothing.
func (b *Buckets) Wait(key string, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	k, ok := b.m[key]
	if !ok {
		return 0
	}
	k.refill(now, b.burst, b.every)
	if k.tokens >= 1 {
		return 0
	}
	return b.until(k)
}

// Give returns a token taken for an attempt that did not happen after all.
func (b *Buckets) Give(key string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.get(key, now)
	k.tokens = min(b.burst, k.tokens+1)
}

// Prune drops the buckets that are full again, which hold nothing worth keeping.
func (b *Buckets) Prune(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pruneLocked(now)
}

func (b *Buckets) get(key string, now time.Time) *bucket {
	k := b.m[key]
	if k == nil {
		if len(b.m) >= maxKeys {
			b.pruneLocked(now)
			if len(b.m) >= maxKeys {
				clear(b.m)
			}
		}
		k = &bucket{tokens: b.burst, last: now}
		b.m[key] = k
	}
	k.refill(now, b.burst, b.every)
	return k
}

func (b *Buckets) pruneLocked(now time.Time) {
	for key, k := range b.m {
		if k.refill(now, b.burst, b.every); k.tokens >= b.burst {
			delete(b.m, key)
		}
	}
}

// until is the time until k has a whole token, at least a millisecond.
func (b *Buckets) until(k *bucket) time.Duration {
	return max(time.Duration((1-k.tokens)*float64(b.every)), time.Millisecond)
}

func (k *bucket) refill(now time.Time, burst float64, every time.Duration) {
	if d := now.Sub(k.last); d > 0 {
		k.tokens = min(burst, k.tokens+float64(d)/float64(every))
		k.last = now
	}
}

// Slots caps what each key holds at once (requests, fetches). Its memory is what is held.
type Slots struct {
	mu  sync.Mutex
	max int
	n   map[string]int
}

// NewSlots allows max at once per key.
func NewSlots(max int) *Slots { return &Slots{max: max, n: map[string]int{}} }

// Take holds one of key's slots, or reports that all of them are held.
func (s *Slots) Take(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[key] >= s.max {
		return false
	}
	s.n[key]++
	return true
}

// Release gives back a slot Take held.
func (s *Slots) Release(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n[key]--; s.n[key] <= 0 {
		delete(s.n, key)
	}
}

// Max is the number of slots each key has.
func (s *Slots) Max() int { return s.max }

// RetryAfter is a wait as the Retry-After header gives it: whole seconds, rounded up, at least 1.
func RetryAfter(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}
