package scaffold

import (
	"fmt"
	"net/http"
	"time"

	"github.com/dotlab/dotlab/internal/lazyre"
	"github.com/dotlab/dotlab/runner"
)

// debianCodename is the form a VERSION_CODENAME read from an image must
// have before it names a suite in a mirror URL (bookworm, trixie, sid).
var debianCodename = lazyre.New(`^[a-z][a-z0-9-]{0,31}$`)

// archiveWord is the form of a suite, component or architecture put into
// an archive URL (bookworm-updates, non-free-firmware, amd64): no '/', '?',
// '#', '%' or "..".
var archiveWord = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9+_-]*(\.[A-Za-z0-9+_-]+)*$`)

// archiveClient is the client the Debian archive's Release and Contents
// files are fetched with: connections checked by the fetch policy's dialer
// (runner.Policy.Dialer: no loopback, private, link-local or metadata
// address unless AllowPrivate), no proxy from the environment, and at most
// runner.MaxRedirects redirects, each to the same host and never from
// https to http (another host only with AllowPrivate). Plain http is
// admitted: Debian mirrors serve it, and the Contents are checked against
// the Release's SHA-256.
func archiveClient(p runner.Policy) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           p.Dialer().DialContext,
			DisableCompression:    true,
			TLSHandshakeTimeout:   15 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			switch first := via[0].URL; {
			case len(via) > runner.MaxRedirects:
				return fmt.Errorf("more than %d redirects: %w", runner.MaxRedirects, runner.ErrRefused)
			case first.Scheme == "https" && req.URL.Scheme != "https":
				return fmt.Errorf("redirect from https to %s: %w", req.URL.Scheme, runner.ErrRefused)
			case req.URL.Scheme != "http" && req.URL.Scheme != "https":
				return fmt.Errorf("redirect to a %s: URL: %w", req.URL.Scheme, runner.ErrRefused)
			case req.URL.Host != first.Host && !p.AllowPrivate:
				return fmt.Errorf("redirect from %s to another host, %s: %w (--allow-private-urls admits it)", first.Host, req.URL.Host, runner.ErrRefused)
			}
			return nil
		},
	}
}
