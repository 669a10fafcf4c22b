package server

import (
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// ConnLimits bound what one client address holds of the server's file
// descriptors (docs/threat-model.md "Spam and denial of service"): every
// accepted TCP connection is a descriptor until it closes, whether or not
// it ever sends a byte. Addresses are counted as the rate limits count
// them (an IPv6 client by its /64); connections from a trusted proxy
// (--trusted-proxy) are not counted per address, since a balancer carries
// many clients: behind one, the balancer bounds connections and the
// server bounds streams by the forwarded client (httpapi).
type ConnLimits struct {
	// PerAddr is how many connections one address may hold open; a
	// connection past it is closed as soon as it is accepted (0: no limit).
	PerAddr int
	// IdlePerAddr is how many of them may be idle at once (accepted with
	// no request yet, or between keep-alive requests); a connection that
	// turns idle past it is closed (0: no limit).
	IdlePerAddr int
	// HeaderTimeout bounds the wait for a request's header, from the
	// first request on a new connection too (http.Server.ReadHeaderTimeout).
	HeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request for this
	// long (http.Server.IdleTimeout).
	IdleTimeout time.Duration
}

// DefaultConnLimits is `dotlab serve` without flags: 256 connections and
// 64 idle ones per address, 10 s for a request header, 2 min idle.
func DefaultConnLimits() ConnLimits {
	return ConnLimits{PerAddr: 256, IdlePerAddr: 64, HeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
}

// connLimiter is a net.Listener that counts connections per client
// address and closes those past ConnLimits.PerAddr at accept; its
// connState, set as the http.Server's ConnState, closes connections that
// turn idle past ConnLimits.IdlePerAddr.
type connLimiter struct {
	net.Listener
	limits  ConnLimits
	trusted []netip.Prefix
	mu      sync.Mutex
	open    map[netip.Prefix]int
	idle    map[netip.Prefix]int
	refused atomic.Int64 // connections closed at accept or when idle past the limits
}

func newConnLimiter(ln net.Listener, limits ConnLimits, trusted []netip.Prefix) *connLimiter {
	return &connLimiter{Listener: ln, limits: limits, trusted: trusted, open: map[netip.Prefix]int{}, idle: map[netip.Prefix]int{}}
}

// limitedConn is an accepted connection counted against its address.
type limitedConn struct {
	net.Conn
	l         *connLimiter
	addr      netip.Prefix
	closeOnce sync.Once
	idle      bool // guarded by l.mu
}

// addrKey is the counting key of a peer address: an IPv4 address (also
// mapped into IPv6) as itself, an IPv6 address by its /64; ok false for
// a trusted proxy or an address that does not parse (not counted).
func (l *connLimiter) addrKey(a net.Addr) (netip.Prefix, bool) {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Prefix{}, false
	}
	ip := ap.Addr().Unmap().WithZone("")
	for _, p := range l.trusted {
		if p.Contains(ip) {
			return netip.Prefix{}, false
		}
	}
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, err := ip.Prefix(bits)
	return p, err == nil
}

// Accept returns the next connection its address may hold; connections
// past ConnLimits.PerAddr are closed here, without a byte read.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, counted := l.addrKey(c.RemoteAddr())
		if !counted || l.limits.PerAddr <= 0 {
			return c, nil
		}
		l.mu.Lock()
		full := l.open[key] >= l.limits.PerAddr
		if !full {
			l.open[key]++
		}
		l.mu.Unlock()
		if full {
			l.refused.Add(1)
			c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: l, addr: key}, nil
	}
}

// Close gives the connection's place back once.
func (c *limitedConn) Close() error {
	c.closeOnce.Do(func() {
		c.l.mu.Lock()
		defer c.l.mu.Unlock()
		if c.idle {
			c.l.dec(c.l.idle, c.addr)
			c.idle = false
		}
		c.l.dec(c.l.open, c.addr)
	})
	return c.Conn.Close()
}

func (l *connLimiter) dec(m map[netip.Prefix]int, k netip.Prefix) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

// connState tracks idleness (http.StateNew and StateIdle are idle) and
// closes a connection that turns idle while its address holds
// ConnLimits.IdlePerAddr idle ones already.
func (l *connLimiter) connState(nc net.Conn, st http.ConnState) {
	c, ok := nc.(*limitedConn)
	if !ok || l.limits.IdlePerAddr <= 0 {
		return
	}
	idle := st == http.StateNew || st == http.StateIdle
	l.mu.Lock()
	over := false
	switch {
	case idle && !c.idle:
		if l.idle[c.addr] >= l.limits.IdlePerAddr {
			over = true
		} else {
			l.idle[c.addr]++
			c.idle = true
		}
	case !idle && c.idle:
		l.dec(l.idle, c.addr)
		c.idle = false
	}
	l.mu.Unlock()
	if over {
		l.refused.Add(1)
		c.Close()
	}
}

// Held reports the connections counted per address now (for tests and
// metrics): open and idle ones, summed over addresses.
func (l *connLimiter) Held() (open, idle int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.open {
		open += n
	}
	for _, n := range l.idle {
		idle += n
	}
	return open, idle
}

// listen opens cfg.Addr behind a connLimiter and the http.Server for h
// with cfg.Conns' timeouts (a zero one takes DefaultConnLimits').
func listen(cfg Config, h http.Handler) (net.Listener, *http.Server, error) {
	trusted, err := trustedProxies(cfg.TrustedProxies)
	if err != nil {
		return nil, nil, err
	}
	lim, def := cfg.Conns, DefaultConnLimits()
	if lim.HeaderTimeout == 0 {
		lim.HeaderTimeout = def.HeaderTimeout
	}
	if lim.IdleTimeout == 0 {
		lim.IdleTimeout = def.IdleTimeout
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, nil, err // Run names the listen address
	}
	cl := newConnLimiter(ln, lim, trusted)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: lim.HeaderTimeout, ReadTimeout: time.Minute, IdleTimeout: lim.IdleTimeout,
		ConnState: cl.connState, ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn)}
	return cl, srv, nil
}

// streamsPerAddr maps Config.StreamsPerAddr (0 disables) to
// httpapi.Config.MaxStreamsPerAddr (0 is its default, negative disables).
func streamsPerAddr(n int) int {
	if n == 0 {
		return -1
	}
	return n
}
