package scaffold

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"time"

	"github.com/dotlab/dotlab"
)

// maxDownloadBytes bounds one file fetched for `manifest init --download`
// when the policy sets no limit (runner.Policy.MaxBytes).
const maxDownloadBytes = 64 << 30

// downloads pins each --download URL (spec v0.2 "downloads",
// docs/manifest-spec.md): fetched now under the fetch policy (the runner's
// URL rules and dialer), hashed while it streams, and added as
// {"name", "url", "sha256"} with a name taken from the URL's last path
// segment, unique among the datasets, helpers and downloads. A manifest
// with downloads declares spec_version "0.2". Errors name the flag and
// the URL's position.
func (b *builder) downloads(ctx context.Context) error {
	if len(b.opts.Downloads) == 0 {
		return nil
	}
	b.m.SpecVersion = dotlab.SpecVersionRuntime
	taken := map[string]bool{}
	for _, d := range b.m.Datasets {
		taken[d.Name] = true
	}
	for _, h := range b.m.Helpers {
		taken[h.Name] = true
	}
	for i, raw := range b.opts.Downloads {
		what := fmt.Sprintf("--download %s (#%d)", raw, i+1)
		if _, err := dotlab.DownloadURLKey(raw); err != nil {
			return fmt.Errorf("%s: %v", what, err)
		}
		if _, err := b.opts.Policy.CheckURL(what, raw); err != nil {
			return err
		}
		sum, n, err := b.fetchHash(ctx, what, raw)
		if err != nil {
			return err
		}
		name := downloadName(raw, taken)
		b.m.Downloads = append(b.m.Downloads, dotlab.Download{Name: name, URL: raw, SHA256: sum})
		b.check(fmt.Sprintf("$.downloads[%d]", len(b.m.Downloads)-1),
			"fetched %s now (%d bytes, sha256 %s): the sandbox answers exactly this URL with these bytes; the code must request it as written", raw, n, sum)
	}
	return nil
}

// fetchHash GETs raw with the policy's client and returns the SHA-256 hex
// of the body and its length.
func (b *builder) fetchHash(ctx context.Context, what, raw string) (string, int64, error) {
	timeout := b.opts.Policy.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Hour
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %v", what, err)
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := b.opts.Policy.Client().Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return "", 0, fmt.Errorf("%s: HTTP %d %s: pin a URL that serves the file", what, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	limit := b.opts.Policy.MaxBytes
	if limit <= 0 {
		limit = maxDownloadBytes
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(resp.Body, limit+1))
	switch {
	case err != nil:
		return "", 0, fmt.Errorf("%s: %w", what, err)
	case n > limit:
		return "", 0, fmt.Errorf("%s: more than %d bytes", what, limit)
	case resp.ContentLength >= 0 && n != resp.ContentLength:
		return "", 0, fmt.Errorf("%s: truncated after %d of %d bytes", what, n, resp.ContentLength)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// downloadName is the URL's last path segment made a valid, unused name.
func downloadName(raw string, taken map[string]bool) string {
	base := "download"
	if u, err := url.Parse(raw); err == nil {
		if seg := path.Base(u.Path); seg != "/" && seg != "." {
			base = nameUnsafe().ReplaceAllString(seg, "_")
		}
	}
	if len(base) > 60 {
		base = base[len(base)-60:]
	}
	name := base
	for i := 2; taken[name]; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	taken[name] = true
	return name
}
