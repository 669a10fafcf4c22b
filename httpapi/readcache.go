package httpapi

import (
	"container/list"
	"hash/fnv"
	"net/http"
	"sync"
	"sync/atomic"
)

// The read cache (docs/protocol.md §9 "Read cache") holds the response
// bodies of the hot GET routes — a claim (GET /claims/{id}), its manifest
// (GET /claims/{id}/manifest) and settled runs (GET /runs/{id}) — in this
// server process, and drops a claim's entries when the store announces the
// claim changed (Notifier): on PostgreSQL as the notification arrives from
// any server process, on SQLite in process at commit. So an entry is never
// older than the notification lag.
//
// Fills cannot race invalidations into a stale entry: a fill takes a token
// (begin) before it reads the store, and its entry is stored (put) only if
// no invalidation of that claim (or of everything) came in between. The
// claims are spread over cacheStripes invalidation counters, so a fill is
// dropped only when a claim of the same stripe changed meanwhile. While
// the notifier is not listening (a PostgreSQL listener reconnecting),
// nothing is served from the cache and nothing is stored: a change could go
// unannounced.

// cacheStripes is the number of invalidation counters claims hash to.
const cacheStripes = 256

// Cache bounds: entries (Config.ReadCache, default defaultReadCache) and
// bytes of bodies held.
const (
	defaultReadCache   = 10000
	maxReadCacheBytes  = 64 << 20
	maxCachedBodyBytes = 1 << 20
)

type cacheKind uint8

const (
	cacheClaim    cacheKind = iota + 1 // GET /claims/{id}
	cacheManifest                      // GET /claims/{id}/manifest
	cacheRun                           // GET /runs/{id}, settled
)

type cacheKey struct {
	kind cacheKind
	id   string
}

type cacheEntry struct {
	key   cacheKey
	claim string
	body  []byte
}

// readCache is a bounded LRU of response bodies, safe for concurrent use; a
// nil *readCache caches nothing.
type readCache struct {
	live     func() bool // Notifier.Listening
	maxItems int

	mu      sync.Mutex
	epoch   uint64               // bumped by reset (a resync)
	total   uint64               // bumped by every invalidation and reset
	gens    [cacheStripes]uint64 // bumped by an invalidation of a claim of the stripe
	items   map[cacheKey]*list.Element
	lru     list.List // front: most recently used; values *cacheEntry
	byClaim map[string]map[cacheKey]struct{}
	bytes   int

	hits, misses atomic.Uint64
}

func newReadCache(maxItems int, live func() bool) *readCache {
	return &readCache{live: live, maxItems: maxItems, items: map[cacheKey]*list.Element{}, byClaim: map[string]map[cacheKey]struct{}{}}
}

// fillToken is what a fill saw before reading the store.
type fillToken struct {
	ok            bool
	stripe        int // -1: the claim is not known before the read (runs)
	epoch, gen, n uint64
}

func stripeOf(claimID string) int {
	h := fnv.New32a()
	h.Write([]byte(claimID))
	return int(h.Sum32() % cacheStripes)
}

// serveCached answers a GET of one record (k) from the read cache when it
// holds it; otherwise read gives the record's JSON, its claim and whether
// it may be cached (cacheable), the cache is filled (under the token of
// claimID, the claim known before the read: "" when only the read tells,
// as for a run) and the record is written.
func (s *Server) serveCached(w http.ResponseWriter, k cacheKey, claimID string, read func() (body []byte, claim string, cacheable bool, err error)) error {
	if b, ok := s.cache.get(k); ok {
		writeBody(w, http.StatusOK, "application/json", b)
		return nil
	}
	tok := s.cache.begin(claimID)
	b, claim, cacheable, err := read()
	if err != nil {
		return err
	}
	if cacheable {
		s.cache.put(tok, k, claim, b)
	}
	writeBody(w, http.StatusOK, "application/json", b)
	return nil
}

// get returns the body under k, if cached and the notifier is listening.
func (c *readCache) get(k cacheKey) ([]byte, bool) {
	if c == nil || !c.live() {
		return nil, false
	}
	c.mu.Lock()
	el, ok := c.items[k]
	if ok {
		c.lru.MoveToFront(el)
	}
	c.mu.Unlock()
	if !ok {
		c.misses.Add(1)
		return nil, false
	}
	c.hits.Add(1)
	return el.Value.(*cacheEntry).body, true
}

// begin takes the token of a fill of claimID's records ("" when the claim
// is known only after the read, as for a run): call it before reading the
// store.
func (c *readCache) begin(claimID string) fillToken {
	if c == nil || !c.live() {
		return fillToken{}
	}
	t := fillToken{ok: true, stripe: -1}
	c.mu.Lock()
	defer c.mu.Unlock()
	t.epoch, t.n = c.epoch, c.total
	if claimID != "" {
		t.stripe = stripeOf(claimID)
		t.gen = c.gens[t.stripe]
	}
	return t
}

// put stores body under k, a record of claimID read after begin returned
// t, unless something that may make it stale was announced since.
func (c *readCache) put(t fillToken, k cacheKey, claimID string, body []byte) {
	if c == nil || !t.ok || len(body) > maxCachedBodyBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.epoch != t.epoch:
		return
	case t.stripe < 0 && c.total != t.n:
		return
	case t.stripe >= 0 && (stripeOf(claimID) != t.stripe || c.gens[t.stripe] != t.gen):
		return
	}
	c.removeLocked(k)
	el := c.lru.PushFront(&cacheEntry{key: k, claim: claimID, body: body})
	c.items[k] = el
	keys := c.byClaim[claimID]
	if keys == nil {
		keys = map[cacheKey]struct{}{}
		c.byClaim[claimID] = keys
	}
	keys[k] = struct{}{}
	c.bytes += len(body)
	for len(c.items) > c.maxItems || c.bytes > maxReadCacheBytes {
		c.removeLocked(c.lru.Back().Value.(*cacheEntry).key)
	}
}

// removeLocked drops the entry under k, if any.
func (c *readCache) removeLocked(k cacheKey) {
	el, ok := c.items[k]
	if !ok {
		return
	}
	e := el.Value.(*cacheEntry)
	c.lru.Remove(el)
	delete(c.items, k)
	c.bytes -= len(e.body)
	if keys := c.byClaim[e.claim]; keys != nil {
		delete(keys, k)
		if len(keys) == 0 {
			delete(c.byClaim, e.claim)
		}
	}
}

// invalidate drops every entry of claimID and fails the fills of its
// stripe that are in flight.
func (c *readCache) invalidate(claimID string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gens[stripeOf(claimID)]++
	c.total++
	for k := range c.byClaim[claimID] {
		c.removeLocked(k)
	}
}

// reset drops everything and fails every fill in flight (a resync).
func (c *readCache) reset() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.total++
	clear(c.items)
	clear(c.byClaim)
	c.lru.Init()
	c.bytes = 0
}

// len returns the number of entries.
func (c *readCache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}
