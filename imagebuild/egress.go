package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dotlab/dotlab/internal/netpolicy"
)

// EgressRule is the rule a refused connection names.
const EgressRule = "build egress to the configured mirrors and indexes only"

// Egress bounds, used when an Egress field is zero.
const (
	DefaultEgressConns   = 64
	DefaultEgressTimeout = 15 * time.Minute
	DefaultEgressBytes   = 8 << 30
	maxRefusalsKept      = 32
)

// Egress is the forward proxy that is a build step's only way out of its
// network namespace (docs/sandbox.md "Building an environment"). It admits
// plain-http requests in absolute form (apt's http mirrors) and CONNECT
// tunnels (https: pip indexes, CRAN mirrors) to the hosts of Allow only, and
// dials only addresses Rules.Addr admits (never link-local or cloud
// metadata; private and loopback only with AllowPrivate). Every other
// request is answered 403 with a text naming EgressRule, and recorded
// (Refused). It runs unprivileged in the dotlab process: no credentials, no
// cache, nothing kept but the last refusals.
type Egress struct {
	allow    map[string]bool // "host:port", host in lower case
	rules    netpolicy.Rules
	maxConns int
	timeout  time.Duration
	budget   atomic.Int64 // bytes still allowed through (both directions)
	sem      chan struct{}
	tr       *http.Transport

	mu      sync.Mutex
	refused []string
}

// EgressOptions configure NewEgress; zero fields take the defaults above.
type EgressOptions struct {
	// Allow lists the admitted HOST:PORT (a URL is also accepted: its host
	// and port, 80 for http and 443 for https, are admitted).
	Allow []string
	Rules netpolicy.Rules
	// MaxConns bounds the connections served at once; Timeout one
	// connection's life; MaxBytes all bytes relayed in the build.
	MaxConns int
	Timeout  time.Duration
	MaxBytes int64
}

// NewEgress checks every Allow entry with o.Rules (a host the fetch policy
// refuses cannot be admitted) and returns the proxy.
func NewEgress(o EgressOptions) (*Egress, error) {
	e := &Egress{allow: map[string]bool{}, rules: o.Rules, maxConns: o.MaxConns, timeout: o.Timeout}
	if e.maxConns <= 0 {
		e.maxConns = DefaultEgressConns
	}
	if e.timeout <= 0 {
		e.timeout = DefaultEgressTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultEgressBytes
	}
	e.budget.Store(o.MaxBytes)
	e.sem = make(chan struct{}, e.maxConns)
	for i, a := range o.Allow {
		hp, err := egressHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("egress[%d] %q: %w", i, a, err)
		}
		h, _, _ := net.SplitHostPort(hp)
		if err := o.Rules.Host(fmt.Sprintf("egress[%d]", i), h); err != nil {
			return nil, err
		}
		e.allow[hp] = true
	}
	d := &net.Dialer{Timeout: 30 * time.Second, Control: e.control}
	e.tr = &http.Transport{DialContext: d.DialContext, Proxy: nil, MaxIdleConnsPerHost: 4,
		IdleConnTimeout: 30 * time.Second, ResponseHeaderTimeout: 2 * time.Minute, TLSHandshakeTimeout: 30 * time.Second}
	return e, nil
}

// egressHostPort reads "host:port" or a URL into a lower-case "host:port".
func egressHostPort(s string) (string, error) {
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		host, _, _ := strings.Cut(rest, "/")
		port := map[string]string{"http": "80", "https": "443"}[strings.ToLower(scheme)]
		if port == "" {
			return "", errors.New("only http and https URLs")
		}
		if _, _, err := net.SplitHostPort(host); err != nil {
			host = net.JoinHostPort(strings.Trim(host, "[]"), port)
		}
		s = host
	}
	h, p, err := net.SplitHostPort(s)
	if err != nil || h == "" || p == "" {
		return "", errors.New("write HOST:PORT or an http(s) URL")
	}
	return net.JoinHostPort(strings.ToLower(h), p), nil
}

// control refuses, at connect time, an address the fetch policy refuses
// (a name that resolves to metadata or a private address).
func (e *Egress) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return err
	}
	if err := e.rules.Addr(ap.Addr()); err != nil {
		return &addrRefusal{addr: ap.Addr(), err: err}
	}
	return nil
}

// addrRefusal is control's refusal of the address an admitted host
// resolved to, so that the proxy can say which host and address.
type addrRefusal struct {
	addr netip.Addr
	err  error
}

func (a *addrRefusal) Error() string { return a.addr.String() + ": " + a.err.Error() }
func (a *addrRefusal) Unwrap() error { return a.err }

// upstreamFailed answers a failed dial or request to an admitted host:
// when the fetch policy refused the address the host resolved to, a
// refusal naming the host, the address and --allow-private-urls,
// recorded like any other (Refused), the same for CONNECT and plain http;
// otherwise 502 with the error.
func (e *Egress) upstreamFailed(w http.ResponseWriter, hostport string, err error) {
	var ar *addrRefusal
	if errors.As(err, &ar) {
		e.refuse(w, fmt.Sprintf("dotlab egress proxy refused %s: it resolves to %s, which the fetch policy refuses (%v); a mirror on a loopback or private address is reached only with --allow-private-urls (rule %q)",
			hostport, ar.addr, ar.err, EgressRule))
		return
	}
	http.Error(w, "dotlab egress proxy: upstream "+hostport+": "+err.Error(), http.StatusBadGateway)
}

// refuse records msg (the last maxRefusalsKept are kept) and answers 403
// with it as the body.
func (e *Egress) refuse(w http.ResponseWriter, msg string) {
	e.mu.Lock()
	if len(e.refused) == maxRefusalsKept {
		e.refused = e.refused[1:]
	}
	e.refused = append(e.refused, msg)
	e.mu.Unlock()
	http.Error(w, msg, http.StatusForbidden)
}

// Allowed lists the admitted HOST:PORT entries, sorted.
func (e *Egress) Allowed() []string {
	out := make([]string, 0, len(e.allow))
	for k := range e.allow {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Refused returns the last refusals (at most 32), oldest first.
func (e *Egress) Refused() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.refused...)
}

// Serve answers proxy requests on l until ctx ends.
func (e *Egress) Serve(ctx context.Context, l net.Listener) error {
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 30 * time.Second, IdleTimeout: time.Minute,
		MaxHeaderBytes: 64 << 10, ErrorLog: nil}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// ServeHTTP is the proxy: CONNECT tunnels and absolute-form http requests.
func (e *Egress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case e.sem <- struct{}{}:
		defer func() { <-e.sem }()
	default:
		http.Error(w, "dotlab egress proxy: too many connections at once", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), e.timeout)
	defer cancel()
	switch {
	case r.Method == http.MethodConnect:
		e.connect(ctx, w, r)
	case r.URL.IsAbs() && strings.EqualFold(r.URL.Scheme, "http"):
		e.forward(ctx, w, r)
	default:
		http.Error(w, "dotlab egress proxy: send proxy requests (absolute http URLs or CONNECT)", http.StatusBadRequest)
	}
}

// admit checks hostport against the list and the fetch policy, recording
// and answering a refusal.
func (e *Egress) admit(w http.ResponseWriter, hostport string) bool {
	hp, err := egressHostPort(hostport)
	if err == nil && e.allow[hp] {
		h, _, _ := net.SplitHostPort(hp)
		if err = e.rules.Host("egress", h); err == nil {
			return true
		}
	}
	msg := fmt.Sprintf("dotlab egress proxy refused %s: it is not on this build's egress list (rule %q; admitted: %s); add it with --egress HOST:PORT if the build needs it",
		hostport, EgressRule, strings.Join(e.Allowed(), ", "))
	if err != nil {
		msg = fmt.Sprintf("dotlab egress proxy refused %s: %v (rule %q)", hostport, err, EgressRule)
	}
	e.refuse(w, msg)
	return false
}

// hopHeaders are not forwarded (RFC 9110 §7.6.1, and the proxy's own).
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization",
	"Proxy-Authenticate", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward relays one plain-http request to an admitted host.
func (e *Egress) forward(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	hostport := r.URL.Host
	if r.URL.Port() == "" {
		hostport = net.JoinHostPort(r.URL.Hostname(), "80")
	}
	if !e.admit(w, hostport) {
		return
	}
	out := r.Clone(ctx)
	out.RequestURI = ""
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	resp, err := e.tr.RoundTrip(out)
	if err != nil {
		e.upstreamFailed(w, hostport, err)
		return
	}
	defer resp.Body.Close()
	for _, h := range hopHeaders {
		resp.Header.Del(h)
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, &budgetReader{r: resp.Body, e: e})
}

// connect opens a tunnel to an admitted host:port.
func (e *Egress) connect(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	if !e.admit(w, r.Host) {
		return
	}
	d := &net.Dialer{Timeout: 30 * time.Second, Control: e.control}
	up, err := d.DialContext(ctx, "tcp", r.Host)
	if err != nil {
		e.upstreamFailed(w, r.Host, err)
		return
	}
	defer up.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "dotlab egress proxy: cannot tunnel", http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusOK)
	down, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer down.Close()
	deadline, _ := ctx.Deadline()
	up.SetDeadline(deadline)
	down.SetDeadline(deadline)
	done := make(chan struct{}, 2)
	go func() { io.Copy(up, &budgetReader{r: buf, e: e}); up.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
	go func() { io.Copy(down, &budgetReader{r: up, e: e}); done <- struct{}{} }()
	<-done
	<-done
}

// budgetReader stops a relay once the build's byte budget is spent.
type budgetReader struct {
	r io.Reader
	e *Egress
}

func (b *budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if b.e.budget.Add(-int64(n)) < 0 {
		return 0, errors.New("dotlab egress proxy: the build's byte budget is spent")
	}
	return n, err
}
