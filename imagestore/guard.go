package imagestore

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// maxRegistryRedirects is how many redirect hops one registry request may
// take (blob downloads are commonly redirected once, to a CDN).
const maxRegistryRedirects = 5

// registryGuard is the RoundTripper under every request of one pull. It
// passes a request on to next only when its host is
//
//   - the image reference's registry,
//   - a token realm that a WWW-Authenticate challenge of that registry's own
//     401 response named (the distribution token-auth flow), or
//   - a redirect hop (at most maxRegistryRedirects, never https to http) of
//     a request that was itself passed,
//
// and refuses any other with an error wrapping ErrUnsafeImage. It is defence
// in depth: Pull fetches every blob by digest from the registry and never
// a descriptor's "urls", so nothing should ever be refused here. next (the
// caller's policy transport) still applies the address policy to each hop.
type registryGuard struct {
	registry string // host[:port] of the registry, lower case, default port dropped
	scheme   string // "https", or "http" for a registry allowed to speak plain http
	next     http.RoundTripper

	mu     sync.Mutex
	realms map[string]bool // hosts named as token realms by the registry
}

func newRegistryGuard(registryHost, scheme string, next http.RoundTripper) *registryGuard {
	return &registryGuard{registry: canonicalHost(registryHost, ""), scheme: scheme, next: next, realms: map[string]bool{}}
}

// canonicalHost lower-cases host and drops the scheme's default port.
func canonicalHost(host, scheme string) string {
	host = strings.ToLower(host)
	if h, port, err := net.SplitHostPort(host); err == nil {
		if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
			return h
		}
	}
	return host
}

func (g *registryGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := g.allow(req); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	resp, err := g.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && g.fromRegistry(req) {
		g.learnRealms(resp.Header.Values("WWW-Authenticate"))
	}
	return resp, err
}

func (g *registryGuard) fromRegistry(req *http.Request) bool {
	return canonicalHost(req.URL.Host, req.URL.Scheme) == g.registry
}

func (g *registryGuard) allow(req *http.Request) error {
	u := req.URL
	if u.Scheme != "https" && !(u.Scheme == "http" && g.scheme == "http") {
		return g.refuse(u, "its scheme is not the registry's ("+g.scheme+")")
	}
	if req.Response != nil {
		hops := 0
		for r := req.Response; r != nil && r.Request != nil; r = r.Request.Response {
			hops++
		}
		if hops > maxRegistryRedirects {
			return g.refuse(u, fmt.Sprintf("it is redirect hop %d (at most %d)", hops, maxRegistryRedirects))
		}
		if prev := req.Response.Request; prev != nil && prev.URL.Scheme == "https" && u.Scheme != "https" {
			return g.refuse(u, "it redirects from https to "+u.Scheme)
		}
		return nil // a hop of a request that was itself allowed
	}
	if g.fromRegistry(req) {
		return nil
	}
	g.mu.Lock()
	realm := g.realms[canonicalHost(u.Host, u.Scheme)]
	g.mu.Unlock()
	if realm {
		return nil
	}
	return g.refuse(u, "its host is neither the image's registry nor a token realm that registry named")
}

func (g *registryGuard) refuse(u *url.URL, why string) error {
	return fmt.Errorf("%w: registry request to %s refused: %s (registry %s)", ErrUnsafeImage, u.Redacted(), why, g.registry)
}

// learnRealms records the host of each realm="URL" parameter in challenges.
func (g *registryGuard) learnRealms(challenges []string) {
	for _, c := range challenges {
		for _, realm := range authParams(c, "realm") {
			u, err := url.Parse(realm)
			if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
				continue // a Basic realm is a label, not a URL
			}
			g.mu.Lock()
			g.realms[canonicalHost(u.Host, u.Scheme)] = true
			g.mu.Unlock()
		}
	}
}

// authParams returns the values of every auth-param named key in one
// WWW-Authenticate header value (RFC 9110 §11.6.1; quoted or token values).
func authParams(header, key string) []string {
	var out []string
	s := header
	for {
		i := indexFold(s, key+"=")
		if i < 0 {
			return out
		}
		// The parameter name must start the value or follow a space or comma.
		if i > 0 && s[i-1] != ' ' && s[i-1] != ',' && s[i-1] != '\t' {
			s = s[i+len(key)+1:]
			continue
		}
		s = s[i+len(key)+1:]
		var v string
		if strings.HasPrefix(s, `"`) {
			var b strings.Builder
			j := 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
				}
				b.WriteByte(s[j])
			}
			v, s = b.String(), s[min(j+1, len(s)):]
		} else {
			j := strings.IndexAny(s, ", \t")
			if j < 0 {
				j = len(s)
			}
			v, s = s[:j], s[j:]
		}
		out = append(out, v)
	}
}

func indexFold(s, sub string) int {
	return strings.Index(strings.ToLower(s), strings.ToLower(sub))
}
