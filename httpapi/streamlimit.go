package httpapi

import (
	"net/http"
	"sync"

	"github.com/dotlab/dotlab"
)

// DefaultStreamsPerAddr is how many live event streams one client address
// may hold at once unless Config.MaxStreamsPerAddr says otherwise
// (docs/threat-model.md "Spam and denial of service": one address must
// not fill the server's stream cap).
const DefaultStreamsPerAddr = 32

// streamCounter counts live event streams per client address (clientAddr:
// the forwarded client behind a trusted proxy, an IPv6 client by its /64).
type streamCounter struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

// newStreamCounter counts up to max streams per address: 0 takes
// DefaultStreamsPerAddr, a negative max disables the limit.
func newStreamCounter(max int) *streamCounter {
	if max == 0 {
		max = DefaultStreamsPerAddr
	}
	return &streamCounter{max: max, n: map[string]int{}}
}

// acquire takes one of addr's streams, or returns a 429 rate_limited
// error naming the limit; release gives it back.
func (c *streamCounter) acquire(w http.ResponseWriter, addr string) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.max > 0 && c.n[addr] >= c.max {
		w.Header().Set("Retry-After", "30")
		return nil, dotlab.Errorf(dotlab.ERATELIMITED, "this client address holds %d live event streams already (--streams-per-addr %d): close one, or read GET /labs/{id}/messages", c.max, c.max)
	}
	c.n[addr]++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.n[addr]--; c.n[addr] <= 0 {
				delete(c.n, addr)
			}
		})
	}, nil
}
