package web

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/dotlab/dotlab"
	"github.com/dotlab/dotlab/internal/lazyre"
)

// The record travels (docs/protocol.md §9 "The record elsewhere"): a
// claim's badge, the Atom feed of settled claims, schema.org ClaimReview
// JSON-LD on a claim page, the citation of a settled claim's record and the
// targets plot. This file holds what they share: the instance's public URL,
// its name and the stable ids minted from the log origin.

// checkPublicURL returns Config.PublicURL without a trailing slash, or an
// error naming what is wrong with it: it must be an absolute http(s) URL
// with a host and no path beyond "/", query, fragment or user info.
func checkPublicURL(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("web: public URL %q: %v", s, err)
	case u.Scheme != "https" && u.Scheme != "http", u.Host == "":
		return "", fmt.Errorf("web: public URL %q: must be an absolute http(s) URL such as https://dotlab.example.org", s)
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "", fmt.Errorf("web: public URL %q: must name only the scheme and host (the pages are served at its root)", s)
	}
	return u.Scheme + "://" + u.Host, nil
}

// abs is path (absolute, "/claims/DL-0001") under the public URL, or path
// itself when the server has none (the feed and JSON-LD then carry
// references relative to the document they are read from).
func (h *Handler) abs(path string) string { return h.publicURL + path }

// instanceName is the DotLab instance as an organization, the author of its
// feed, reviews and citable records: "DotLab (HOST)" with the public URL's
// host, else the log origin; "DotLab" when neither is known.
func (h *Handler) instanceName() string {
	switch {
	case h.publicURL != "":
		u, _ := url.Parse(h.publicURL)
		return "DotLab (" + u.Host + ")"
	case h.log != nil:
		return "DotLab (" + h.log.Origin() + ")"
	}
	return "DotLab"
}

var dnsName = lazyre.New(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$`)

// tagID is a tag: URI (RFC 4151) for what, a path such as "claims/DL-0001",
// minted on date: tag:AUTHORITY,YYYY-MM-DD:SPECIFIC. The authority and the
// specific's prefix come from the transparency log's origin, which is fixed
// at the server's first start, so the ids stay the same whatever public URL
// the server is later given ("dotlab.example.org/log" gives
// tag:dotlab.example.org,2026-01-02:log/claims/DL-0001). Without a log the
// public URL's host is the authority, else dotlab.invalid (RFC 2606).
func (h *Handler) tagID(date time.Time, what string) string {
	origin := ""
	if h.log != nil {
		origin = h.log.Origin()
	} else if h.publicURL != "" {
		u, _ := url.Parse(h.publicURL)
		origin = u.Hostname()
	}
	authority, rest, _ := strings.Cut(strings.ToLower(origin), "/")
	if !dnsName().MatchString(authority) {
		authority, rest = "dotlab.invalid", origin
	}
	var specific []string
	for _, seg := range strings.Split(rest+"/"+what, "/") {
		if seg != "" {
			specific = append(specific, url.PathEscape(seg))
		}
	}
	return "tag:" + authority + "," + date.UTC().Format(time.DateOnly) + ":" + strings.Join(specific, "/")
}

// feedEpoch is the date the feed's own tag: id is minted on (the feed format's
// first release); it never changes, so neither does the feed's id.
var feedEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// reviewWords are the protocol's words for a compared outcome of a settled
// claim, the only rating a ClaimReview, feed entry or citation gives: text,
// never a score (a failed replication is information about a run under one
// spec, not a verdict on the paper's authors). spec_issue and
// input_mismatch say nothing about the paper and have none.
func reviewWords(o dotlab.Outcome) (string, bool) {
	switch o {
	case dotlab.OutcomeReproduced:
		return "reproduced under the published spec", true
	case dotlab.OutcomeNotReproduced:
		return "not reproduced under the published spec", true
	}
	return "", false
}

// outcomeWords says what a settled claim's outcome means, in the protocol's
// words, for any outcome (feed entries and citations).
func outcomeWords(o dotlab.Outcome) string {
	if w, ok := reviewWords(o); ok {
		return w
	}
	switch o {
	case dotlab.OutcomeSpecIssue:
		return "spec issue: the spec could not be executed as written"
	case dotlab.OutcomeInputMismatch:
		return "input mismatch: an input did not match its pinned hash"
	}
	return string(o)
}
