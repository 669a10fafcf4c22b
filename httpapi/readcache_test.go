package httpapi

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// otherStripe returns a claim id whose stripe differs from id's.
func otherStripe(id string) string {
	for i := 1; ; i++ {
		o := fmt.Sprintf("DL-%04d", 9000+i)
		if stripeOf(o) != stripeOf(id) {
			return o
		}
	}
}

// TestReadCacheFillsNeverOutliveAnInvalidation: a fill whose store read
// began before an invalidation of its claim (or a resync) is not stored,
// so it cannot bring back a state the announcement made stale.
func TestReadCacheFillsNeverOutliveAnInvalidation(t *testing.T) {
	live := atomic.Bool{}
	live.Store(true)
	c := newReadCache(100, live.Load)
	k := cacheKey{cacheClaim, "DL-0001"}

	tok := c.begin("DL-0001")
	c.invalidate("DL-0001") // the write's announcement arrives during the read
	c.put(tok, k, "DL-0001", []byte("old"))
	if _, ok := c.get(k); ok {
		t.Fatal("a fill that raced an invalidation of its claim was stored")
	}

	tok = c.begin("DL-0001")
	c.invalidate(otherStripe("DL-0001")) // another claim, another stripe: harmless
	c.put(tok, k, "DL-0001", []byte("v1"))
	if b, ok := c.get(k); !ok || string(b) != "v1" {
		t.Fatalf("fill after an unrelated invalidation: %q %v", b, ok)
	}
	c.invalidate("DL-0001")
	if _, ok := c.get(k); ok {
		t.Fatal("entry survived its claim's invalidation")
	}

	// A run: its claim is known only after the read, so any invalidation
	// in between fails the fill.
	rk := cacheKey{cacheRun, "run_1"}
	tok = c.begin("")
	c.invalidate(otherStripe("DL-0001"))
	c.put(tok, rk, "DL-0001", []byte("run"))
	if _, ok := c.get(rk); ok {
		t.Fatal("a run fill that raced an invalidation was stored")
	}
	tok = c.begin("")
	c.put(tok, rk, "DL-0001", []byte("run"))
	c.invalidate("DL-0001")
	if _, ok := c.get(rk); ok {
		t.Fatal("a run survived its claim's invalidation")
	}

	// A resync fails every fill in flight and empties the cache.
	tok = c.begin("DL-0001")
	c.put(c.begin("DL-0002"), cacheKey{cacheClaim, "DL-0002"}, "DL-0002", []byte("x"))
	c.reset()
	c.put(tok, k, "DL-0001", []byte("old"))
	if c.len() != 0 {
		t.Fatalf("%d entries after a resync", c.len())
	}

	// Not listening: nothing served, nothing stored.
	c.put(c.begin("DL-0001"), k, "DL-0001", []byte("v2"))
	live.Store(false)
	if _, ok := c.get(k); ok {
		t.Fatal("served while the notifier is not listening")
	}
	c.put(c.begin("DL-0003"), cacheKey{cacheClaim, "DL-0003"}, "DL-0003", []byte("v"))
	live.Store(true)
	if _, ok := c.get(cacheKey{cacheClaim, "DL-0003"}); ok {
		t.Fatal("stored a fill begun while the notifier was not listening")
	}
}

// TestReadCacheBounded: the cache holds at most its entry bound, dropping
// the least recently used, and its per-claim index shrinks with it.
func TestReadCacheBounded(t *testing.T) {
	c := newReadCache(3, func() bool { return true })
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("DL-%04d", i)
		c.put(c.begin(id), cacheKey{cacheClaim, id}, id, []byte(id))
	}
	c.get(cacheKey{cacheClaim, "DL-0001"}) // DL-0002 is now the least recently used
	c.put(c.begin("DL-0004"), cacheKey{cacheClaim, "DL-0004"}, "DL-0004", []byte("4"))
	if c.len() != 3 {
		t.Fatalf("%d entries, bound 3", c.len())
	}
	if _, ok := c.get(cacheKey{cacheClaim, "DL-0002"}); ok {
		t.Fatal("the least recently used entry was kept")
	}
	for _, id := range []string{"DL-0001", "DL-0003", "DL-0004"} {
		if _, ok := c.get(cacheKey{cacheClaim, id}); !ok {
			t.Fatalf("%s evicted", id)
		}
	}
	if len(c.byClaim) != 3 {
		t.Fatalf("claim index holds %d claims, want 3", len(c.byClaim))
	}
	c.put(c.begin("DL-0005"), cacheKey{cacheClaim, "DL-0005"}, "DL-0005", make([]byte, maxCachedBodyBytes+1))
	if _, ok := c.get(cacheKey{cacheClaim, "DL-0005"}); ok {
		t.Fatal("a body over the per-entry bound was cached")
	}
}

// TestReadCacheConcurrent hammers one cache from many goroutines (run with
// -race): readers fill a claim from a "store" whose version a writer bumps
// and then invalidates, as a write and its announcement do. A read that
// began after an invalidation returned must never see an older version.
func TestReadCacheConcurrent(t *testing.T) {
	c := newReadCache(64, func() bool { return true })
	var version atomic.Int64 // the store
	var announced atomic.Int64
	ids := []string{"DL-0001", "DL-0002", "DL-0003", "DL-0004"}
	read := func(id string) int64 {
		k := cacheKey{cacheClaim, id}
		if b, ok := c.get(k); ok {
			var v int64
			fmt.Sscan(string(b), &v)
			return v
		}
		tok := c.begin(id)
		v := version.Load()
		runtime.Gosched() // widen the window between the read and the fill
		c.put(tok, k, id, []byte(fmt.Sprint(v)))
		return v
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var stale atomic.Int64
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				floor := announced.Load()
				if v := read(ids[(g+i)%len(ids)]); v < floor {
					stale.Add(1)
				}
			}
		}(g)
	}
	for n := 1; n <= 20000; n++ {
		version.Store(int64(n)) // the write commits
		for _, id := range ids {
			c.invalidate(id) // its announcement is delivered
		}
		announced.Store(int64(n))
		runtime.Gosched() // let readers fill and read between writes
		if n%5000 == 0 {
			c.reset()
		}
	}
	close(stop)
	wg.Wait()
	if stale.Load() > 0 {
		t.Fatalf("%d reads returned a version older than the last one announced", stale.Load())
	}
}
