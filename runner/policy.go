package runner

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"syscall"
	"time"

	"github.com/dotlab/dotlab/internal/netpolicy"
)

// Policy decides what a manifest may make this machine fetch (docs/sandbox.md
// "Fetching what a manifest names"). The zero value is the strict
// policy that agents taking work from a server use: https only, no file://,
// no credentials in URLs, and no connection to loopback, private,
// link-local, CGNAT, multicast, unspecified, reserved or cloud-metadata
// addresses, checked on the form of every URL (address literals in any
// spelling) and on the resolved address of every connection (so DNS answers
// and every redirect hop are covered). The URL and address rules are
// internal/netpolicy's, the same the server lists claims by, so nothing this
// zero value refuses by URL form can be listed.
type Policy struct {
	// AllowPrivate (CLI --allow-private-urls) also admits loopback and private
	// addresses, plain http and the git:// transport, for tests, demos and
	// local registries.
	AllowPrivate bool
	// LocalRoot (CLI --allow-local DIR) admits file:// URLs and local paths,
	// resolved inside this directory only (through os.Root for files: no
	// `..`, no absolute path or symlink leading out of it). Empty, the
	// default on every command, refuses local files and local repositories
	// (docs/sandbox.md "Fetching what a manifest names").
	LocalRoot string
	// MaxBytes caps one download (datasets, archives); 0 means 64 GiB.
	MaxBytes int64
	// Timeout is the fetch budget of one rerun: every download, clone and
	// image pull of the run together, retries included, must finish within
	// it; 0 means 2 hours. Past it the run is a spec_issue.
	Timeout time.Duration
	// MinRate and StallWindow are the stall rule: a download that receives
	// fewer than MinRate×StallWindow bytes in any StallWindow is cut off
	// (ErrStalled). 0 means 32 KiB/s over 30 s.
	MinRate     int64
	StallWindow time.Duration
	// TrustCAFile names a PEM file of certificate authorities trusted for
	// https fetches and registries besides the system's (a lab's own
	// registry or mirror): the CLI sets it from --trust-ca or the
	// environment variable DOTLAB_TRUST_CA (TrustCAEnv). A file that cannot
	// be read or holds no certificate fails every request, naming the file.
	TrustCAFile string
}

// TrustCAEnv is the environment variable runners read Policy.TrustCAFile from.
const TrustCAEnv = "DOTLAB_TRUST_CA"

// LocalPolicy admits plain http, private addresses and local files inside
// root: what `dotlab rerun --allow-local ROOT` uses for a manifest of one's
// own.
func LocalPolicy(root string) Policy { return Policy{AllowPrivate: true, LocalRoot: root} }

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

// ErrRefused marks a URL or address the policy does not allow. It is
// netpolicy.ErrRefused, the sentinel the server's listing check wraps too.
var ErrRefused = netpolicy.ErrRefused

// MaxRedirects is how many redirects Client follows for one request; the
// next one is refused (ErrRefused), so a redirect loop ends as a refusal
// of the URL as written, not a retry.
const MaxRedirects = 5

// rules is the policy's URL and address part, the one shared with the
// server's listing check (internal/netpolicy).
func (p Policy) rules() netpolicy.Rules {
	return netpolicy.Rules{AllowPrivate: p.AllowPrivate, AllowFile: p.LocalRoot != ""}
}

// CheckURL parses raw, a URL or local path the manifest names, and checks
// its form with the rules the server lists claims by (netpolicy.Rules.URL):
// scheme (https; http and git:// with AllowPrivate; file:// and local paths
// with LocalRoot), no credentials, and no host that is a refused address
// literal in any spelling or a localhost name. what names the manifest
// field for the error ("datasets[0].url"); errors wrap ErrRefused.
func (p Policy) CheckURL(what, raw string) (*url.URL, error) {
	return p.rules().URL(what, raw)
}

// CheckImage checks the registry host of an image reference
// (NAME@sha256:<64 hex>) with the same rules (netpolicy.Rules.ImageRef):
// an address-literal registry must be public unless AllowPrivate, and a
// registry reached over plain http needs AllowPrivate. what names the field
// ("environment.image"); errors wrap ErrRefused.
func (p Policy) CheckImage(what, ref string) error {
	return p.rules().ImageRef(what, ref)
}

// CheckAddr says whether a connection to ip is allowed
// (netpolicy.Rules.Addr): loopback, private, link-local, CGNAT, multicast,
// unspecified and reserved addresses are refused; with AllowPrivate only
// link-local and cloud-metadata addresses (also embedded in IPv6 transition
// addresses) are. Errors wrap ErrRefused.
func (p Policy) CheckAddr(ip netip.Addr) error {
	return p.rules().Addr(ip)
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
// real peer), no transparent decompression, and the URL rules
// (netpolicy.Rules.URL, without local files; http(s) only) on every request
// and on the Location of every redirect response, before any client follows
// it, so image pulls and git fetches are held to them too.
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
	if p.TrustCAFile != "" {
		pool, err := trustPool(p.TrustCAFile)
		if err != nil {
			return failing{err}
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &stallGuard{policy: p, next: &schemeCheck{policy: p, next: t}}
}

// trustPool is the system's certificate pool plus the PEM certificates in file.
func trustPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("trusted CA file (%s): %w", TrustCAEnv, err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("trusted CA file %s (%s) holds no PEM certificate", file, TrustCAEnv)
	}
	return pool, nil
}

// failing is a RoundTripper that fails every request with err.
type failing struct{ err error }

func (f failing) RoundTrip(*http.Request) (*http.Response, error) { return nil, f.err }

// schemeCheck applies the URL rules to each request and to the redirect
// it answers with. Its errors name hosts, never a URL's credentials, path or
// query (a presigned query is a credential too).
type schemeCheck struct {
	policy Policy
	next   http.RoundTripper
}

func (s *schemeCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := s.policy.checkHop("request", req.URL); err != nil {
		return nil, err
	}
	resp, err := s.next.RoundTrip(req)
	if err != nil || resp.StatusCode < 300 || resp.StatusCode > 399 {
		return resp, err
	}
	loc := resp.Header.Get("Location")
	if loc == "" {
		return resp, nil
	}
	// Checked here rather than in CheckRedirect: an http.Client's redirect
	// error repeats the raw Location, credentials included.
	target, err := req.URL.Parse(loc)
	if err == nil {
		err = s.policy.checkHop("redirect from "+req.URL.Host, target)
	} else {
		err = fmt.Errorf("redirect from %s: the Location is not a URL and is %w", req.URL.Host, ErrRefused)
	}
	if err == nil && req.URL.Scheme == "https" && target.Scheme != "https" {
		err = fmt.Errorf("redirect from %s to %s:// is %w", req.URL.Host, target.Scheme, ErrRefused)
	}
	if err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

// checkHop applies the URL rules to one HTTP request or redirect target:
// http(s) only, never a local file.
func (p Policy) checkHop(what string, u *url.URL) error {
	if u.Scheme != "https" && u.Scheme != "http" {
		return fmt.Errorf("%s: a %s: URL is %w: only http(s) is fetched over HTTP", what, u.Scheme, ErrRefused)
	}
	_, err := netpolicy.Rules{AllowPrivate: p.AllowPrivate}.URL(what, u.String())
	return err
}

// Client is an http.Client over Transport that follows at most
// MaxRedirects (5) redirects, refusing the sixth, and none from https to
// anything else; every redirect target passes the URL rules (Transport)
// before it is requested.
func (p Policy) Client() *http.Client {
	return &http.Client{
		Transport: p.Transport(),
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			// via holds the requests made so far: the original and one per
			// redirect followed, so len(via) is the number of this redirect.
			// (Transport has already checked the target's form.)
			if len(via) > MaxRedirects {
				return fmt.Errorf("redirect %d: more than %d redirects are %w", len(via), MaxRedirects, ErrRefused)
			}
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect from https to %s is %w", req.URL.Scheme, ErrRefused)
			}
			return p.checkHop("redirect", req.URL)
		},
	}
}

// ctxWithTimeout applies the policy's end-to-end limit.
func (p Policy) ctxWithTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.timeout())
}
