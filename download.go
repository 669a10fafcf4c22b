package dotlab

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
)

// DownloadURLKey is the form in which a pinned download's URL (spec v0.2
// "downloads", docs/manifest-spec.md) and a request inside the sandbox are
// compared (docs/sandbox.md "Pinned downloads"): "<scheme>://<host>[:<port>]<path>[?<query>]"
// with the scheme and host in lower case, the scheme's default port (80 for
// http, 443 for https) left out, an empty path written "/", the path
// percent-decoded and the query kept byte for byte. Two manifest URLs with
// the same key are the same download. It refuses what a pinned download
// cannot be: a scheme other than http and https, no host, credentials, or a
// fragment (a client never sends one, so it could never be matched).
func DownloadURLKey(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("is not a URL")
	}
	return downloadKey(strings.ToLower(u.Scheme), u.Host, u.Path, u.RawQuery, u.User != nil, u.Fragment != "" || strings.Contains(raw, "#"))
}

// RequestURLKey is DownloadURLKey of a request the responder received:
// scheme "http" or "https", the Host it names ("host" or "host:port") and
// the decoded path and raw query of its request target.
func RequestURLKey(scheme, host, path, rawQuery string) (string, error) {
	return downloadKey(scheme, host, path, rawQuery, false, false)
}

func downloadKey(scheme, host, path, rawQuery string, user, fragment bool) (string, error) {
	switch {
	case scheme != "http" && scheme != "https":
		return "", errors.New("must be an http:// or https:// URL")
	case user:
		return "", errors.New("has credentials in the URL (user:password@): remove them")
	case fragment:
		return "", errors.New("has a fragment (#…), which a client never sends: remove it")
	case host == "":
		return "", errors.New("has no host")
	}
	host = strings.ToLower(host)
	if h, port, err := net.SplitHostPort(host); err == nil {
		if port == "" || scheme == "http" && port == "80" || scheme == "https" && port == "443" {
			host = h
			if strings.Contains(h, ":") {
				host = "[" + h + "]"
			}
		}
	}
	if path == "" {
		path = "/"
	}
	key := scheme + "://" + host + path
	if rawQuery != "" {
		key += "?" + rawQuery
	}
	return key, nil
}

// downloadDiffers reports whether input_hashes shows a pinned download
// whose hash differs from the manifest's (an input_mismatch run,
// docs/protocol.md).
func (m *Manifest) downloadDiffers(in map[string]string) bool {
	for _, d := range m.Downloads {
		if h, ok := in[DownloadInputKey(d.Name)]; ok && h != d.SHA256 {
			return true
		}
	}
	return false
}

// hasDownloadKey reports whether key is "download:<name>" of one of m's downloads.
func (m *Manifest) hasDownloadKey(key string) bool {
	for _, d := range m.Downloads {
		if DownloadInputKey(d.Name) == key {
			return true
		}
	}
	return false
}

// checkPinnedDownloads: a compared run shows every pinned download's hash
// as "download:<name>", equal to the manifest's (a differing one is
// input_mismatch, as for a dataset).
func (b *RunBody) checkPinnedDownloads(m *Manifest, p *Problems) {
	for _, d := range m.Downloads {
		key := DownloadInputKey(d.Name)
		got, ok := b.InputHashes[key]
		switch {
		case !ok:
			p.Add("$.input_hashes", "missing download %q (key %q): a %s run must show the hash of every download", d.Name, key, b.Outcome)
		case got != d.SHA256:
			p.Add(fmt.Sprintf("$.input_hashes[%q]", key), "is %s but the manifest pins %s: publish input_mismatch instead", got, d.SHA256)
		}
	}
}
