package runner

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkDownload1GiB downloads and verifies a 1 GiB file served on
// loopback (http.ServeFile, sendfile) into an empty content-addressed cache,
// and hashes the same bytes in memory with crypto/sha256, interleaved in each
// iteration. Goal (docs/sandbox.md): download+verify >= 0.9x the raw hash speed.
func BenchmarkDownload1GiB(b *testing.B) {
	const size = 1 << 30
	data := make([]byte, size)
	rand.Read(data)
	src := filepath.Join(b.TempDir(), "blob")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, src) }))
	defer srv.Close()
	p := LocalPolicy("/")
	var tRaw, tFetch time.Duration
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if got := sha256.Sum256(data); got != sum {
			b.Fatal("hash changed")
		}
		tRaw += time.Since(start)

		cache, err := OpenCache(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		f := &fetcher{cache: cache, policy: p, client: p.Client()}
		start = time.Now()
		got, err := f.fetch(context.Background(), "bench", srv.URL+"/blob", want)
		tFetch += time.Since(start)
		if err != nil || got.SHA256 != want || got.CacheHit {
			b.Fatalf("%v %+v", err, got)
		}
		os.RemoveAll(filepath.Dir(filepath.Dir(got.Path)))
	}
	b.StopTimer()
	gbps := func(d time.Duration) float64 { return float64(size) * float64(b.N) / d.Seconds() / 1e9 }
	b.ReportMetric(gbps(tRaw), "sha256-GB/s")
	b.ReportMetric(gbps(tFetch), "download-GB/s")
	b.ReportMetric(gbps(tFetch)/gbps(tRaw), "x-raw-sha256")
}
