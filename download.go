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
// in its escaped form normalised as RFC 3986 §6.2.2 says (NormalizeEscapedPath:
// percent-encodings in upper case, those of unreserved characters decoded,
// every other encoding kept, so "/a%3Fb" and "/a?b", "/a%2Fb" and "/a/b"
// stay different URLs) and the query kept byte for byte. Two manifest URLs with
// the same key are the same download. It refuses what a pinned download
// cannot be: a scheme other than http and https, no host, credentials, or a
// fragment (a client never sends one, so it could never be matched).
func DownloadURLKey(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", errors.New("is not a URL")
	}
	return downloadKey(strings.ToLower(u.Scheme), u.Host, u.EscapedPath(), u.RawQuery, u.User != nil, u.Fragment != "" || strings.Contains(raw, "#"))
}

// RequestURLKey is DownloadURLKey of a request the responder received:
// scheme "http" or "https", the Host it names ("host" or "host:port") and
// the escaped path (url.URL.EscapedPath) and raw query of its request
// target.
func RequestURLKey(scheme, host, escapedPath, rawQuery string) (string, error) {
	return downloadKey(scheme, host, escapedPath, rawQuery, false, false)
}

// NormalizeEscapedPath is an escaped URL path (as url.URL.EscapedPath gives
// it) normalised per RFC 3986 §6.2.2.1 and §6.2.2.2 only: the hex digits of
// every percent-encoding in upper case, and the encoding of an unreserved
// character (ALPHA, DIGIT, '-', '.', '_', '~') decoded. Every other
// encoded octet stays encoded ("%3F" is not "?", "%2F" not "/"); no dot
// segment is removed. A malformed '%' is kept as it is.
func NormalizeEscapedPath(p string) string {
	if !strings.Contains(p, "%") {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if p[i] != '%' || i+2 >= len(p) || !isHex(p[i+1]) || !isHex(p[i+2]) {
			b.WriteByte(p[i])
			continue
		}
		c := unhex(p[i+1])<<4 | unhex(p[i+2])
		if unreserved(c) {
			b.WriteByte(c)
		} else {
			b.WriteString("%" + strings.ToUpper(p[i+1:i+3]))
		}
		i += 2
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// unreserved is RFC 3986 §2.3's unreserved set.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
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
	key := scheme + "://" + host + NormalizeEscapedPath(path)
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
			p.Add("$.input_hashes", "missing download %q (key %q): a %s run must show the hash of every download", d.Name, key, b.comparedKind())
		case got != d.SHA256:
			p.Add(fmt.Sprintf("$.input_hashes[%q]", key), "is %s but the manifest pins %s: publish input_mismatch instead", got, d.SHA256)
		}
	}
}
