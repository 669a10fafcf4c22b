package httpapi

import (
	"crypto/sha256"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dotlab/dotlab"
	"golang.org/x/time/rate"
)

// RateLimit is a token bucket: PerSecond requests per second on average,
// bursts of Burst. A zero PerSecond disables the limit.
type RateLimit struct {
	PerSecond float64
	Burst     int
}

// DefaultAgentLimit applies per API key: 20 requests/s, bursts of 60
// (docs/threat-model.md "Spam and denial of service").
func DefaultAgentLimit() RateLimit { return RateLimit{PerSecond: 20, Burst: 60} }

// DefaultAnonymousLimit applies per client address for calls without a
// key: 30 requests/s, bursts of 120.
func DefaultAnonymousLimit() RateLimit { return RateLimit{PerSecond: 30, Burst: 120} }

// limiter keeps one token bucket per key (a hash of the API key, or the
// client address), forgetting buckets idle for 10 minutes. A key gets its
// own bucket only once it has authenticated: made-up keys share their
// address's bucket, so inventing keys does not escape the limit.
type limiter struct {
	agent, anon RateLimit
	trusted     []netip.Prefix // proxies whose X-Forwarded-For is believed (clientAddr)
	clock       dotlab.Clock
	mu          sync.Mutex
	buckets     map[string]*bucket
	known       map[[32]byte]bool // hashes of keys that authenticated
	lastSweep   time.Time
}

// maxKnownKeys bounds the set of authenticated key hashes (it is cleared
// when full; keys re-enter it on their next authenticated call).
const maxKnownKeys = 100000

// markKnown records that key authenticated.
func (l *limiter) markKnown(key string) {
	sum := sha256.Sum256([]byte(key))
	l.mu.Lock()
	if len(l.known) >= maxKnownKeys {
		clear(l.known)
	}
	l.known[sum] = true
	l.mu.Unlock()
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

func newLimiter(agent, anon RateLimit, trusted []netip.Prefix, clock dotlab.Clock) *limiter {
	return &limiter{agent: agent, anon: anon, trusted: trusted, clock: clock, buckets: map[string]*bucket{}, known: map[[32]byte]bool{}}
}

// clientAddr is the address a request's limit is kept by: its peer's, or,
// when the peer is one of the trusted proxies (a balancer in front of the
// server, `dotlab serve --trusted-proxy`), the client the proxy names: the
// rightmost X-Forwarded-For entry that is not itself a trusted proxy.
// Entries left of it could be forged by the client and are never used; a
// header that names no usable address leaves the peer's. An IPv6 client is
// kept by its /64 (clientKey).
func clientAddr(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if !isTrusted(host, trusted) {
		return clientKey(host)
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		a, err := netip.ParseAddr(hop)
		if err != nil {
			return clientKey(host)
		}
		if !isTrusted(a.String(), trusted) {
			return clientKey(hop)
		}
	}
	return clientKey(host)
}

// clientKey is the bucket of client address host: an IPv4 address (also
// when mapped into IPv6) as itself; an IPv6 address by its /64, the
// network one host is given (RFC 6177) and can pick any of 2^64 addresses
// from; anything else as written.
func clientKey(host string) string {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	p, err := a.Prefix(64)
	if err != nil {
		return a.String()
	}
	return p.String()
}

func isTrusted(host string, trusted []netip.Prefix) bool {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// allow reports whether r may proceed, and if not, after how long to retry.
func (l *limiter) allow(r *http.Request) (bool, time.Duration) {
	key, cfg := "a:"+clientAddr(r, l.trusted), l.anon
	l.mu.Lock()
	if k, ok := bearerKey(r); ok {
		if sum := sha256.Sum256([]byte(k)); l.known[sum] {
			key, cfg = "k:"+string(sum[:]), l.agent
		}
	}
	if cfg.PerSecond <= 0 {
		l.mu.Unlock()
		return true, 0
	}
	now := l.clock.Now()
	if now.Sub(l.lastSweep) > time.Minute {
		for k, b := range l.buckets {
			if now.Sub(b.seen) > 10*time.Minute {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b, ok := l.buckets[key]
	if !ok {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(cfg.PerSecond), cfg.Burst)}
		l.buckets[key] = b
	}
	b.seen = now
	res := b.lim.ReserveN(now, 1)
	delay := res.DelayFrom(now)
	if delay > 0 {
		res.CancelAt(now)
	}
	l.mu.Unlock()
	return delay == 0, delay
}

// rateLimit checks the caller's limit. Over it, it sets Retry-After (whole
// seconds, rounded up) and, for a public page, answers a small HTML page
// itself (answered), or for the API returns a 429 rate_limited error.
func (s *Server) rateLimit(w http.ResponseWriter, r *http.Request) (answered bool, err error) {
	if s.limiter == nil {
		return false, nil
	}
	ok, wait := s.limiter.allow(r)
	if ok {
		return false, nil
	}
	secs := int(math.Ceil(wait.Seconds()))
	if secs < 1 {
		secs = 1
	}
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	if !strings.HasPrefix(r.URL.Path, "/api/") {
		// A public page: a small HTML answer with the pages' policy.
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", "default-src 'none'; base-uri 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprintf(w, "<!doctype html>\n<html lang=\"en\"><meta charset=\"utf-8\"><title>429 Too many requests · DotLab</title>\n<h1>429 Too many requests</h1>\n<p role=\"alert\">Too many requests from your address: retry after %d s.</p>\n", secs)
		return true, nil
	}
	return false, dotlab.Errorf(dotlab.ERATELIMITED, "too many requests: retry after %d s (limit %g/s per agent, %g/s per address without a key)",
		secs, s.limiter.agent.PerSecond, s.limiter.anon.PerSecond)
}
