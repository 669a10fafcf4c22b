package runner

import (
	"net/url"
	"regexp"
)

// urlInText finds URLs in error text and notes.
var urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)

// redactURL is raw with any userinfo password replaced by "xxxxx", for
// logs and notes (which are public); text that is not a URL is kept.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// scrubURLs rewrites every URL in text (an error, a note) without its
// userinfo, query and fragment: a redirect target's presigned query
// (X-Amz-Signature=…) is a credential, and errors built by net/http quote
// the full URL of the request that failed (docs/sandbox.md "Fetching what
// a manifest names"). The scheme, host and path stay, so the text still
// says what failed.
func scrubURLs(text string) string {
	return urlInText.ReplaceAllStringFunc(text, func(raw string) string {
		u, err := url.Parse(raw)
		if err != nil {
			return "<unparsable URL>"
		}
		if u.User == nil && u.RawQuery == "" && u.Fragment == "" {
			return raw
		}
		hidden := u.RawQuery != "" || u.Fragment != ""
		u.User, u.RawQuery, u.Fragment, u.ForceQuery = nil, "", "", false
		if hidden {
			return u.String() + "?…"
		}
		return u.String()
	})
}

// errText is err's text for logs and notes, URLs scrubbed.
func errText(err error) string { return scrubURLs(err.Error()) }
