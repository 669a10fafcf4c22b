package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Policy decides what a manifest may make this machine fetch (DESIGN.md
// "Fetching what a stranger's manifest names"). The zero value is the strict
// policy that agents taking work from a server use: https only, no file://,
// and no connection to loopback, private, link-local, CGNAT, multicast,
// unspecified or cloud-metadata addresses, checked on the resolved address
// of every connection (so DNS answers and every redirect hop are covered).
type Policy struct {
	// AllowPrivate (CLI --allow-private-urls) also admits loopback and private
	// addresses, plain http and the git:// transport, for tests, demos and
	// local registries.
	AllowPrivate bool
	// AllowFile admits file:// URLs and local paths (local `dotlab rerun` of
	// one's own manifest only).
	AllowFile bool
	// MaxBytes caps one download (datasets, archives); 0 means 64 GiB.
	MaxBytes int64
	// Timeout caps one download or clone, end to end; 0 means 2 hours.
	Timeout time.Duration
}

// LocalPolicy is what `dotlab rerun` uses by default: the user reruns a
// manifest of their own choosing, so file://, plain http and private
// addresses are allowed (pass --strict-fetch for the agents' policy).
func LocalPolicy() Policy { return Policy{AllowPrivate: true, AllowFile: true} }

func (p Policy) maxBytes() int64 {
	if p.MaxBytes > 0 {
		return p.MaxBytes
	}
	return 64 << 30
}

func (p Policy) timeout() time.Duration {
	if p.Timeout > 0 {
		return p.Timeout
	}
	return 2 * time.Hour
}

// ErrRefused marks a URL or address the policy does not allow.
var ErrRefused = errors.New("refused by the fetch policy")

// CheckURL parses raw and says whether its scheme is allowed; what names the
// manifest field for the error ("datasets[0].url").
func (p Policy) CheckURL(what, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a URL: %w", what, raw, err)
	}
	switch u.Scheme {
	case "https":
	case "http", "git":
		if !p.AllowPrivate {
			return nil, fmt.Errorf("%s: %s:// is %w: use https (or pass --allow-private-urls for local testing)", what, u.Scheme, ErrRefused)
		}
	case "file", "":
		if !p.AllowFile {
			return nil, fmt.Errorf("%s: local files are %w: only `dotlab rerun` of your own manifest may read them", what, ErrRefused)
		}
	default:
		return nil, fmt.Errorf("%s: scheme %q is %w: use https", what, u.Scheme, ErrRefused)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%s: credentials in URLs are %w", what, ErrRefused)
	}
	return u, nil
}

// metadataAddrs are cloud metadata endpoints outside the blocked ranges
// (fd00:ec2::254 is ULA, 169.254.169.254 link-local, 100.100.100.200 CGNAT,
// all blocked anyway; these are listed for the record and for AllowPrivate).
var metadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"),
	netip.MustParseAddr("100.100.100.200"),
	netip.MustParseAddr("fd00:ec2::254"),
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// reservedPrefixes are special-purpose ranges (RFC 6890 and successors)
// that no public dataset, repository or registry lives in: documentation
// and benchmarking nets, the former class E, NAT64 and 6to4 (which embed
// IPv4 addresses that could be private), and IPv6 documentation.
var reservedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("fc00::/7"),
}

// CheckAddr says whether a connection to ip is allowed. Cloud metadata
// addresses are refused even with AllowPrivate.
func (p Policy) CheckAddr(ip netip.Addr) error {
	ip = ip.Unmap()
	for _, m := range metadataAddrs {
		if ip == m {
			return fmt.Errorf("address %s (cloud metadata) is %w", ip, ErrRefused)
		}
	}
	if p.AllowPrivate {
		return nil
	}
	reserved := false
	for _, p := range reservedPrefixes {
		reserved = reserved || p.Contains(ip)
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() || cgnat.Contains(ip) || reserved {
		return fmt.Errorf("address %s (loopback, private, link-local or reserved) is %w; pass --allow-private-urls for local testing", ip, ErrRefused)
	}
	return nil
}

// Dialer returns a net.Dialer whose Control hook checks every address it is
// about to connect to (after DNS resolution).
func (p Policy) Dialer() *net.Dialer {
	return &net.Dialer{
		Timeout:   30 * time.Second,
		KeepAlive: 30 * time.Second,
		Control: func(network, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("dial %s: %w", address, err)
			}
			return p.CheckAddr(ap.Addr())
		},
	}
}

// Transport is the http.RoundTripper for everything a manifest names:
// policy-checked dials, no proxy from the environment (the check must see the
// real peer), no transparent decompression, and a scheme check on every
// request, redirects included.
func (p Policy) Transport() http.RoundTripper {
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           p.Dialer().DialContext,
		ForceAttemptHTTP2:     true,
		DisableCompression:    true,
		MaxIdleConns:          16,
		IdleConnTimeout:       60 * time.Second,
		TLSHandshakeTimeout:   15 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &schemeCheck{policy: p, next: t}
}

type schemeCheck struct {
	policy Policy
	next   http.RoundTripper
}

func (s *schemeCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !(req.URL.Scheme == "http" && s.policy.AllowPrivate) {
		return nil, fmt.Errorf("%s: %s:// is %w", req.URL.Redacted(), req.URL.Scheme, ErrRefused)
	}
	return s.next.RoundTrip(req)
}

// Client is an http.Client over Transport that follows at most 5 redirects
// and never from https to anything else.
func (p Policy) Client() *http.Client {
	return &http.Client{
		Transport: p.Transport(),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("more than 5 redirects")
			}
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect from https to %s is %w", req.URL.Scheme, ErrRefused)
			}
			if _, err := p.CheckURL("redirect", req.URL.String()); err != nil || strings.EqualFold(req.URL.Scheme, "file") {
				return fmt.Errorf("redirect to %s is %w", req.URL.Redacted(), ErrRefused)
			}
			return nil
		},
	}
}

// ctxWithTimeout applies the policy's end-to-end limit.
func (p Policy) ctxWithTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.timeout())
}
