package translog_test

import (
	"compress/gzip"
	"io"
	"net/http"
	"testing"

	"github.com/dotlab/dotlab/sqlstore"
	"github.com/dotlab/dotlab/tlogfmt"
	"github.com/dotlab/dotlab/translog"
)

// TestServedHeaders: content types, caching (checkpoint uncached, full
// tiles immutable, partial tiles short), gzip bundles, 404s.
func TestServedHeaders(t *testing.T) {
	d := openDB(t, sqlstore.SQLite)
	l := d.open(t, translog.Options{Origin: "http.test/log"})
	appendN(t, d, l, 0, 300)
	base := serve(t, l).URL + translog.Prefix
	for _, c := range []struct {
		path, ctype, cache string
		status, bytes      int
	}{
		{"checkpoint", "text/plain; charset=utf-8", "no-cache", 200, -1},
		{"tile/0/000", "application/octet-stream", "public, max-age=31536000, immutable", 200, 256 * 32},
		{"tile/0/001.p/44", "application/octet-stream", "public, max-age=300", 200, 44 * 32},
		{"tile/1/000.p/1", "application/octet-stream", "public, max-age=300", 200, 32},
		{"tile/0/001.p/45", "", "", 404, -1},
		{"tile/0/001", "", "", 404, -1},
		{"tile/1/000", "", "", 404, -1},
		{"tile/0/0001", "", "", 404, -1},
	} {
		resp, err := http.Get(base + c.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || (c.status == 200 && (resp.Header.Get("Content-Type") != c.ctype || resp.Header.Get("Cache-Control") != c.cache)) ||
			(c.bytes >= 0 && len(b) != c.bytes) {
			t.Errorf("%s: %d %q %q, %d bytes", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Cache-Control"), len(b))
		}
	}
	req, _ := http.NewRequest("GET", base+"tile/entries/000", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("bundle not gzipped: %v", resp.Header)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	es, err := tlogfmt.SplitBundle(raw)
	if err != nil || len(es) != 256 {
		t.Fatalf("%d entries, %v", len(es), err)
	}
}
