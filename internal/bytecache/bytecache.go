// Package bytecache is the one bounded, concurrency-safe cache of values
// that never change once made, keyed by a content hash (a listed
// manifest, parsed or encoded, keyed by its canonical identity;
// docs/manifest-spec.md section 5). It is bounded by the bytes its values
// stand for: when a Put would pass the bound, the cache is emptied first
// (values are cheap to rebuild and a hostile mix of sizes cannot pin
// memory).
package bytecache

import "sync"

// Cache maps keys to values of type V, holding at most MaxBytes of them as
// counted by Put's size argument.
type Cache[V any] struct {
	mu       sync.Mutex
	maxBytes int
	used     int
	m        map[string]V
}

// New returns an empty cache bounded by maxBytes.
func New[V any](maxBytes int) *Cache[V] {
	return &Cache[V]{maxBytes: maxBytes, m: map[string]V{}}
}

// Get returns the value under key and whether there was one.
func (c *Cache[V]) Get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

// Put stores v under key, counting size bytes for it; a value larger than
// the whole bound is not stored.
func (c *Cache[V]) Put(key string, v V, size int) {
	if size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; ok {
		return
	}
	if c.used+size > c.maxBytes {
		clear(c.m)
		c.used = 0
	}
	c.m[key] = v
	c.used += size
}
